// Which items share one multicast Load's block on a machine run (DESIGN §3.4, §8 "Data movement"): the groups
// the machine's semaphore handshake joins. No SystemC here.
#ifndef SIM_MACHINE_MULTICAST_GROUPS_H_
#define SIM_MACHINE_MULTICAST_GROUPS_H_

#include <cstdint>
#include <vector>

#include "sim/place/placement.h"
#include "spatial/program.h"

namespace spatial {

// The receivers of one multicast Load (DESIGN §3.4): items that differ only in the multicast axis, run at the
// same ordinal on their sites and fold the same blocks (WorkItem.blocks). Grouping by ordinal keeps the handshake
// deadlock-free: every site runs its items, blocks and stages in the same (ordinal, block, stage) order, so every
// member of a group reaches it having passed only groups of lower rank; grouping by the fold count makes every
// member reach each block of it. (One group across counts, each block joining the members that fold it, would hold
// an ordinal's members in step with its longest and undo a causal prefill's balance: Qwen3-8B's, 615 k -> 666 k
// cycles on Wormhole; tt-metal's causal kernels share no K/V stream at all.) Members on one site would serialize, so
// a group never spans one.
struct MulticastGroups {
  std::vector<int32_t> group_of_item;  // by section item index; -1: the item reads its own block
  std::vector<int32_t> size;           // members per group
  std::vector<int64_t> sender_site;    // the member with the lowest axis coordinate reads DRAM (tt-metal's sender)
  std::vector<int64_t> span_hops;      // router hops from the sender to its farthest receiver
};

// The multicast groups of every multicast Load of the section, by stage (empty for other stages), on a run that
// folds `blocks` blocks. A group of one is no multicast: its item's group is -1.
std::vector<MulticastGroups> GroupMulticasts(const Section& s, const Placement& pl, int64_t blocks);

}  // namespace spatial

#endif  // SIM_MACHINE_MULTICAST_GROUPS_H_
