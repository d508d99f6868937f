#include "certify/admitted_inputs.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "spatial/semantics/interval.h"
#include "spatial/tensor_data.h"

namespace spatial {
namespace {

struct GuardState {
  std::string key;  // "section/stage field"
  int64_t lo = 0;
  int64_t hi = -1;
  int64_t admitted_lo = 0;  // what the check lets through: the program's constant
  int64_t admitted_hi = -1;
  bool holds = false;
  bool operator==(const GuardState& o) const { return key == o.key && lo == o.lo && hi == o.hi; }
};

// Every guard of the composition when an input is promised to lie in a range, by a key that names it (a key that
// repeats, two sections of one name, gets " #2", ...), and the keys in certificate order. A probe can reach fewer
// guards than the unpromised run (a Select band dead for the promised values, a check that fails outright and stops
// the section), so guards are matched by key, never by position.
struct Guards {
  std::vector<std::string> order;
  std::map<std::string, GuardState> by_key;
  const GuardState* Find(const std::string& key) const {
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : &it->second;
  }
};

// The guards when `input` is promised to lie in [lo, hi]; nullopt when the program does not certify under that
// promise.
class GuardOracle {
 public:
  GuardOracle(const Composition& c, const Target& t) : c_(c), t_(t) {}

  // `probe`: the guards as far as the checks got, even when the promise makes a check fail outright (a trip
  // that admits no value of the probe): the probes only read how each guard moves with the input.
  std::optional<Guards> Of(const std::string& input, std::optional<std::pair<int64_t, int64_t>> r,
                           bool probe = false) {
    CertifyOptions options;
    if (r) options.input_ranges[input] = *r;
    CertifyResult result = Certify(c_, t_, options);
    if (!result.ok() && !probe) return std::nullopt;
    Guards out;
    for (const proto::SectionProof& s : result.certificate.sections()) {
      for (const proto::Guard& g : s.guards()) {
        const std::string key =
            absl::StrCat(s.name(), "/", g.stage().empty() ? "(section)" : g.stage(), " ", g.field());
        std::string unique = key;
        for (int n = 2; out.by_key.count(unique); ++n) unique = absl::StrCat(key, " #", n);
        out.order.push_back(unique);
        out.by_key.emplace(unique, GuardState{key, g.proven().lo(), g.proven().hi(), g.admitted().lo(),
                                              g.admitted().hi(), g.always_holds()});
      }
    }
    return out;
  }

 private:
  const Composition& c_;
  const Target& t_;
};


class Search {
 public:
  Search(GuardOracle& oracle, std::string input, const std::vector<std::string>& dependent)
      : oracle_(oracle), input_(std::move(input)), dependent_(dependent) {}

  // Every dependent guard always holds when the input lies in [lo, hi]. A guard that no value reaches (an empty
  // proven range, or none reported: its Select band is dead for these values) never faults.
  bool Holds(int64_t lo, int64_t hi) {
    std::optional<Guards> g = oracle_.Of(input_, std::make_pair(lo, hi));
    if (!g) return false;
    for (const std::string& key : dependent_) {
      const GuardState* s = g->Find(key);
      if (s != nullptr && !s->holds && s->lo <= s->hi) return false;
    }
    return true;
  }

  // Grows one end of a range that holds: dir +1 finds the largest h in [good, limit] with Holds(fixed, h), dir -1
  // the smallest l in [limit, good] with Holds(l, fixed), given that `good` holds. Monotone (a wider range proves
  // no more), so: one step past `good` first (an exact affine solve stops there), then gallop, then bisect.
  int64_t Grow(int64_t fixed, int64_t good, int64_t limit, int dir) {
    auto holds = [&](int64_t v) { return dir > 0 ? Holds(fixed, v) : Holds(v, fixed); };
    __int128 g = good, bad = static_cast<__int128>(limit) + dir, step = 1;
    while (g != limit) {
      const __int128 next = dir > 0 ? std::min<__int128>(g + step, limit) : std::max<__int128>(g - step, limit);
      if (!holds(static_cast<int64_t>(next))) {
        bad = next;
        break;
      }
      g = next;
      step *= 2;
    }
    while ((bad - g) * dir > 1) {
      const __int128 mid = g + (bad - g) / 2;
      (holds(static_cast<int64_t>(mid)) ? g : bad) = mid;
    }
    return static_cast<int64_t>(g);
  }

 private:
  GuardOracle& oracle_;
  std::string input_;
  const std::vector<std::string>& dependent_;
};

}  // namespace

std::vector<proto::AdmittedInput> AdmitInputs(const Composition& c, const Target& target) {
  std::vector<proto::AdmittedInput> out;
  GuardOracle oracle(c, target);
  std::optional<Guards> base = oracle.Of("", std::nullopt);
  if (!base) return out;
  for (const Tensor& t : CompositionInputs(c)) {
    if (!IsInteger(t.precision)) continue;
    const int64_t full_lo = IntMin(t.precision), full_hi = IntMax(t.precision);
    // Two neighbouring probes v0 and v0 + 1, at 0 and 1 unless one of them stops short of a guard the unpromised
    // run reaches (a 1-based position's 0 is a first row of -1, which fails a cache write's check outright): then
    // at 1 and 2.
    int64_t v0 = 0;
    std::optional<Guards> at0, at1;
    for (int64_t v : {int64_t{0}, int64_t{1}}) {
      v0 = v;
      at0 = oracle.Of(t.name, std::make_pair(v, v), /*probe=*/true);
      at1 = oracle.Of(t.name, std::make_pair(v + 1, v + 1), /*probe=*/true);
      if (at0->order.size() == base->order.size() && at1->order.size() == base->order.size()) break;
    }
    std::vector<std::string> dependent;
    for (const std::string& key : base->order) {
      const GuardState* g0 = at0->Find(key);
      const GuardState* g1 = at1->Find(key);
      const GuardState& b = *base->Find(key);
      if (g0 == nullptr || g1 == nullptr || !(*g0 == b) || !(*g1 == b)) dependent.push_back(key);
    }
    if (dependent.empty()) continue;

    // The affine probe: a guard that sees the input as the point a + b * v admits v in a solvable range.
    __int128 lo = full_lo, hi = full_hi;
    std::vector<std::string> bounded_by;
    for (const std::string& key : dependent) {
      const GuardState* g0 = at0->Find(key);
      const GuardState* g1 = at1->Find(key);
      if (g0 == nullptr || g1 == nullptr) continue;  // not reached by a probe: left to the bisection
      if (g0->lo != g0->hi || g1->lo != g1->hi) continue;  // not a point (or empty): left to the bisection
      const __int128 b = static_cast<__int128>(g1->lo) - g0->lo, a = g0->lo - b * v0;
      if (b == 0) continue;
      const __int128 alo = g0->admitted_lo, ahi = g0->admitted_hi;
      lo = std::max(lo, b > 0 ? CeilDivWide(alo - a, b) : CeilDivWide(ahi - a, b));
      hi = std::min(hi, b > 0 ? FloorDivWide(ahi - a, b) : FloorDivWide(alo - a, b));
    }
    for (const std::string& key : dependent) bounded_by.push_back(base->Find(key)->key);

    Search search(oracle, t.name, dependent);
    std::optional<std::pair<int64_t, int64_t>> found;
    std::optional<std::pair<int64_t, int64_t>> seed;
    if (lo <= hi && search.Holds(static_cast<int64_t>(lo), static_cast<int64_t>(hi))) {
      seed = std::make_pair(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    } else {
      // Not affine (a clamp, a product, a guard behind a band): start from one feasible value.
      const std::vector<__int128> tries = {lo, hi, lo + (hi - lo) / 2, 0, 1, 2};
      for (__int128 p : tries) {
        if (p < full_lo || p > full_hi) continue;
        const int64_t v = static_cast<int64_t>(p);
        if (search.Holds(v, v)) {
          seed = std::make_pair(v, v);
          break;
        }
      }
    }
    if (seed) {
      // Grow from the seed: the affine solve is exact for sums, but a floor division (a row's tile, pos / 32)
      // admits more than its probe suggests.
      const int64_t up = search.Grow(seed->first, seed->second, full_hi, +1);
      found = std::make_pair(search.Grow(up, seed->first, full_lo, -1), up);
    }
    if (!found) continue;
    proto::AdmittedInput& a = out.emplace_back();
    a.set_tensor(t.name);
    a.mutable_admitted()->set_lo(found->first);
    a.mutable_admitted()->set_hi(found->second);
    for (const std::string& k : bounded_by) a.add_guards(k);
  }
  return out;
}

}  // namespace spatial
