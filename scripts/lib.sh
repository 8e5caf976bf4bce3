# Shell helpers shared by the scripts under scripts/ and image/ (sourced, not run).

# free_port: print a loopback TCP port nothing answers on. Another process may take it
# before the caller binds it; the caller then fails to start, which is visible.
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

# cargo_test LOG ARGS...: run `cargo test --locked ARGS...`, its output on the terminal
# and appended to LOG; tests that skip themselves at run time (a tool this machine
# lacks) append to $BERTH_SKIP_LOG, which the caller sets. Returns cargo's status.
cargo_test() {
  local log=$1
  shift
  local status=0
  cargo test --locked "$@" 2>&1 | tee -a "$log" || status=$?
  return "$status"
}

# test_summary LOG SKIP_LOG: one closing line over every test binary in LOG (cargo
# prints one per binary): passed, failed, and skipped with the reasons. A test that
# skipped itself at run time (listed in SKIP_LOG) ran as "ok" but proved nothing, so
# it counts as skipped, not passed. `#[ignore]`d tools (reason "tool: ...") are helpers
# that scripts run, not tests, and are counted apart.
test_summary() {
  awk -F'\t' -v skiplog="$2" '
    BEGIN {
      # A test that met several missing tools is listed once per tool: count it once.
      while ((getline line < skiplog) > 0) {
        split(line, f, "\t")
        if (!(f[1] in seen)) { seen[f[1]] = 1; runtime[f[2]]++; nrun++ }
      }
    }
    /^test result:/ {
      n = split($0, w, /[ ;.]+/)
      for (i = 1; i < n; i++) {
        if (w[i+1] == "passed") passed += w[i]
        if (w[i+1] == "failed") failed += w[i]
      }
    }
    /^test .* \.\.\. ignored, / {
      reason = $0; sub(/^.* \.\.\. ignored, /, "", reason)
      if (reason ~ /^tool:/) tools++; else { ignored[reason]++; nign++ }
    }
    END {
      skipped = nign + nrun; passed -= nrun
      why = ""
      for (r in ignored) why = why (why == "" ? "" : "; ") ignored[r] ": " r
      for (r in runtime) why = why (why == "" ? "" : "; ") runtime[r] ": " r
      printf "all tests: %d passed, %d failed, %d skipped", passed, failed, skipped
      if (skipped > 0) printf " (%s)", why
      if (tools > 0) printf "; %d tools not run as tests", tools
      printf "\n"
    }' "$1"
}

# split_debug IN OUT [OBJCOPY]: the shipped form of a built berthd. OUT is IN with its
# debug information and symbol table removed (what goes on the box); OUT.debug holds
# them (compressed), for gdb, addr2line or coredumpctl. OUT names its debug file in a
# .gnu_debuglink section (with the file's CRC) and both carry the linker's build ID, so
# a debugger finds the one from the other (next to the binary, or installed as
# /usr/lib/debug/.build-id/<xx>/<rest>.debug). OBJCOPY: the target's objcopy
# (default objcopy; aarch64-linux-gnu-objcopy for an arm64 binary).
split_debug() {
  local in=$1 out=$2 objcopy=${3:-objcopy}
  "$objcopy" --only-keep-debug --compress-debug-sections=zlib "$in" "$out.debug"
  "$objcopy" --strip-all "$in" "$out"
  "$objcopy" --add-gnu-debuglink="$out.debug" "$out"
  chmod 0644 "$out.debug"
}

# shipped_link_args LIST: rustc's arguments for the shipped link of berthd (lld):
# - the functions named in LIST (scripts/hot-functions) side by side at the start of its
#   code, by --symbol-ordering-file (names LIST lacks, or this build lacks, are left
#   where they fall: a list made for another build only lays out less). docs/adr/0010.
# - relative relocations packed (-z pack-relative-relocs, DT_RELR; glibc >= 2.36, the
#   appliance's trixie has 2.41): the position-independent binary's ~35,000 relocations
#   of pointers in its tables took 24 bytes each in .rela.dyn (~820 KB); packed, ~10 KB.
#   The executable stays position-independent (ASLR).
shipped_link_args() {
  printf '%s\n' -C "link-arg=-Wl,--symbol-ordering-file=$1" -C link-arg=-Wl,--no-warn-symbol-ordering \
    -C link-arg=-Wl,-z,pack-relative-relocs
}

# hot_span BIN LIST [NM]: how widely BIN's functions named in LIST lie: their size, and
# the 64 KiB windows of code they fall in, which is what the kernel maps in around the
# pages they touch. BIN must have its symbol table (an unstripped build, or its .debug
# file); NM: the target's nm (default nm).
hot_span() {
  "${3:-nm}" -S -t d --defined-only "$1" | awk -v list="$2" '
    BEGIN { while ((getline name < list) > 0) hot[name] = 1 }
    ($3 == "t" || $3 == "T") && ($4 in hot) {
      at = $1 + 0; size = $2 + 0; bytes += size
      for (w = int(at / 65536); w <= int((at + size - 1) / 65536); w++) window[w] = 1
    }
    END {
      for (w in window) n++
      printf "%d KiB of hot code in %d KiB of 64 KiB windows\n", bytes / 1024, n * 64
    }'
}

# build_shipped OUT: the shipped form of berthd for this machine, as scripts/build-aarch64
# makes the arm64 one: the dist profile, built once to learn which functions run
# (scripts/hot-functions, which needs BITCOIND_EXEC), linked again with them side by
# side (shipped_link_args, which also packs the relocations), then split (split_debug):
# OUT, OUT.debug, and OUT.hot the list.
build_shipped() {
  local out=$1 dist=${CARGO_TARGET_DIR:-target}/dist hot
  local -a args
  mkdir -p "$(dirname "$out")"
  cargo build --profile dist --locked --bin berthd
  scripts/hot-functions "$dist/berthd" >"$out.hot"
  hot=$(realpath "$out.hot")
  echo "build_shipped: $(wc -l <"$hot") hot functions; as first linked: $(hot_span "$dist/berthd" "$hot")" >&2
  # Only the binary is linked again (its fat-LTO step); the dependencies are not rebuilt.
  mapfile -t args < <(shipped_link_args "$hot")
  cargo rustc --profile dist --locked --bin berthd -- "${args[@]}"
  echo "build_shipped: laid out: $(hot_span "$dist/berthd" "$hot")" >&2
  split_debug "$dist/berthd" "$out"
}
