#!/usr/bin/env bash
# Smoke-runs every cargo-fuzz target of somna for a short time each (FUZZ_SECONDS, default 20).
#
# Works on a stable toolchain: cargo-fuzz passes -Z flags, so RUSTC_BOOTSTRAP=1 is set (no
# nightly toolchain is needed or downloaded). The address sanitizer is used by default (its
# runtime ships with stable rustc); FUZZ_SANITIZER=none builds without it (faster).
#
# The corpus of each target starts from fuzz/regressions/TARGET/ (inputs that found bugs once).
#
# Usage: fuzz/smoke.sh [TARGET...]      (default: every target)
# Crashes go to fuzz/artifacts/TARGET/; reproduce with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-...
set -uo pipefail
cd "$(dirname "$0")/.."

secs="${FUZZ_SECONDS:-20}"
sanitizer="${FUZZ_SANITIZER:-address}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked || exit 1
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

echo "== building ${#targets[@]} fuzz targets (sanitizer: $sanitizer)"
cargo fuzz build --sanitizer "$sanitizer" || exit 1

passed=0
failed=0
failures=()
for t in "${targets[@]}"; do
  extra=()
  asan="${ASAN_OPTIONS:-}"
  if [ "$t" = db_mutations ]; then
    # A store whose engine failed on a damaged page is leaked by design (closing it would write
    # into the damaged file): not a leak to report, per input or at exit.
    extra=(-detect_leaks=0)
    asan="detect_leaks=0${asan:+:$asan}"
  fi
  echo "== fuzz $t for ${secs}s ${extra[*]:-}"
  mkdir -p "fuzz/corpus/$t"
  if [ -d "fuzz/regressions/$t" ]; then
    cp -n fuzz/regressions/"$t"/* "fuzz/corpus/$t/" 2>/dev/null
  fi
  if ASAN_OPTIONS="$asan" cargo fuzz run --sanitizer "$sanitizer" "$t" -- \
    -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 "${extra[@]}" \
    >"fuzz/smoke-$t.log" 2>&1; then
    passed=$((passed + 1))
    grep -E "^(Done|stat::number_of_executed_units)" "fuzz/smoke-$t.log" | tail -1
  else
    failed=$((failed + 1))
    failures+=("$t")
    tail -40 "fuzz/smoke-$t.log"
  fi
done

if [ "$failed" -gt 0 ]; then
  echo "failing targets: ${failures[*]} (logs: fuzz/smoke-TARGET.log)"
fi
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
