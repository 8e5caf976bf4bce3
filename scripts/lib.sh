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
