#!/bin/sh
# `make fuzz`: seeds a corpus per libFuzzer target from the project's own inputs, then runs each target for
# FUZZ_SECONDS (default 60) with the given timeout and memory limit. Crashes land in build-fuzz/crashes/<target>/;
# the summary prints executions per target. Exit 1 when any target found a crash, leak or timeout. FUZZ_TARGETS
# (default: all five) names the targets to run, e.g. to run two halves side by side on two cores.
set -u
B=${1:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
C=$B/corpus
mkdir -p "$C"
status=0
seed() {  # target, then files
  t=$1; shift
  mkdir -p "$C/$t"
  for f in "$@"; do cp "$f" "$C/$t/" 2>/dev/null; done
}
seed lower examples/ops/*.textproto
seed target targets/*.textproto
mkdir -p "$C/parse_certify_vm"
# The program fuzzer reads its first byte as the encoding (even: text): prefix the text programs with a NUL.
for f in tests/golden/*.program.textproto; do
  { printf '\000'; cat "$f"; } > "$C/parse_certify_vm/$(basename "$f")"
done
mkdir -p "$C/npy" "$C/cli"
python3 - "$C/npy" <<'PY'
import struct, sys
def npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += ' ' * (63 - (10 + len(header)) % 64) + '\n'
    open(path, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + data)
npy(sys.argv[1] + '/f4.npy', '<f4', '(2, 3)', struct.pack('<6f', 1, 2, 3, 4, 5, 6))
npy(sys.argv[1] + '/i4.npy', '<i4', '(1, 4)', struct.pack('<4i', 1, -2, 3, 7))
npy(sys.argv[1] + '/f8.npy', '<f8', '(3,)', struct.pack('<3d', 0.5, 1.5, -2))
PY
printf -- '--need=1\nprog.textproto' > "$C/cli/a"
printf -- '--target\ntest_tiny\n--need\n2\n-o\nout' > "$C/cli/b"
printf -- '--input\na=1\n--input=b=2,3\n--quiet\n--need=x\n--\n-' > "$C/cli/c"
summary=""
for t in ${FUZZ_TARGETS:-parse_certify_vm lower target npy cli}; do
  mkdir -p "$B/crashes/$t"
  log="$B/fuzz-$t.log"
  "$B/tests/fuzz/${t}_fuzzer" -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="$B/crashes/$t/" -print_final_stats=1 "$C/$t" > "$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  summary="$summary$(printf '%-18s exit %d, %s executions, %s' "$t" "$rc" "${runs:-?}" "${cov:-cov: ?}")\n"
  [ "$rc" -ne 0 ] && status=1
done
printf "$summary"
exit $status
