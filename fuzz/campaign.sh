#!/usr/bin/env bash
# The long fuzz runs (issue 7 item 1): each target named on the command line runs for SECONDS
# (default 3600) from its committed seeds, its log kept in fuzz/logs/<target>.log, and the corpus
# it grew minimized back into fuzz/corpus/<target>/ with `cargo fuzz cmin`.
#
#   fuzz/campaign.sh [-t SECONDS] [-a] TARGET...
#
# -a continues an earlier run: the log is appended to (so it keeps every run's count) and the run
# starts from the corpus that run committed.
#
# Runs at nice 19, so it can share a machine with other work. Needs nightly and cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")"
secs=3600
append=false
while [ $# -gt 0 ]; do
    case "$1" in
        -t) secs=$2; shift 2 ;;
        -a) append=true; shift ;;
        *) break ;;
    esac
done
mkdir -p logs work
# nice alone does not yield to the rest of the machine when this runs in a session of its own
# (setsid, a service): with autogroup scheduling, niceness only counts inside the session, so
# the session's group is niced too.
echo 19 >/proc/self/autogroup 2>/dev/null || true
for t in "$@"; do
    rm -rf "work/$t"
    cp -r "corpus/$t" "work/$t"
    log="logs/$t.log"
    $append || : >"$log"
    {
        echo "# cargo +nightly fuzz run $t -- -max_total_time=$secs (nice 19)"
        echo "# started $(date -u +%FT%TZ) on $(uname -r), $(nproc) cpus"
    } >>"$log"
    status=0
    nice -n 19 cargo +nightly fuzz run "$t" "work/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >>"$log" 2>&1 || status=$?
    echo "# ended $(date -u +%FT%TZ) with status $status" >>"$log"
    if [ "$status" -ne 0 ]; then
        echo "campaign: $t failed (status $status); see fuzz/$log and fuzz/artifacts/$t" >&2
        continue
    fi
    # Keep only inputs that add coverage, so the committed corpus stays small.
    nice -n 19 cargo +nightly fuzz cmin "$t" "work/$t" >>"logs/$t.cmin.log" 2>&1
    echo "# corpus: $(ls "work/$t" | wc -l) files after cmin (seeded with $(ls "corpus/$t" | wc -l))" >>"$log"
    # The named seeds (real captures) stay, whatever cmin thinks of them; inputs a fuzzer found
    # (named by their hash) stay only if cmin kept them.
    for f in $(git ls-files "corpus/$t" | grep -v '/[0-9a-f]\{40\}$'); do cp -n "$f" "work/$t/"; done
    rm -rf "corpus/$t" && mv "work/$t" "corpus/$t"
done
