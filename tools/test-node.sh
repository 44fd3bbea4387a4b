#!/usr/bin/env bash
# The Node.js suite: node --test over bindings/node/test.
#   tools/test-node.sh
# make test-node sets the environment that names this build
# (PACKEDFUNC_LIBRARY, PACKEDFUNC_NODE_HELPER, PF_TESTLIB, ...), NODE (the
# interpreter) and BUILD, after `npm ci` installed koffi from the committed
# lock file. It prints one line as it runs: a dot for each test as it
# completes (F for a failure), then the runner's counts. The runner's whole
# output stays in $BUILD/node/node-test.log; on a failure the failing tests'
# reports follow the line. The counts join the tally of
# tools/run-c-tests.sh. The exit status is the runner's.
set -uo pipefail
BUILD=${BUILD:-build}
NODE=${NODE:-node}
mkdir -p "$BUILD/node"
log=$BUILD/node/node-test.log
printf '%-20s ' test-node

dots() {
  local line
  while IFS= read -r line; do
    case $line in
      'ok '*) printf '.' ;;
      'not ok '*) printf 'F' ;;
    esac
  done
}

"$NODE" --test --test-reporter=tap bindings/node/test/ 2>&1 | tee "$log" | dots
rc=${PIPESTATUS[0]}
passed=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$log" | tail -n 1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$log" | tail -n 1)
passed=${passed:-0} failed=${failed:-0}
if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
tools/run-c-tests.sh --add "$passed" "$failed"
echo "  $passed passed, $failed failed"
if [[ $rc -ne 0 ]]; then
  # The reports of the tests that failed, without the passing ones.
  awk '/^not ok /{p = 1} /^ok /{p = 0} p' "$log"
  echo "FAIL [test-node] node --test exited $rc; its output: $log"
fi
exit "$rc"
