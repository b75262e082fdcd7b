# Sourced by the emulation scripts that compile one *EmuConfig.cc per module key (moegemm_run.sh,
# moedecode_run.sh): the shared steps. Expects root, build, here, out, flags, cxx, jobs set.
#
#   emu_link TEST                   the link line of tests/TEST (memra's libraries) without its own
#                                   object, output and gtest_main: append objects, -o and run it
#   emu_compile_keys KEYS CONFIG DEPS FLAGS_FN
#                                   compiles CONFIG once per key listed in KEYS (objects
#                                   $out/cfg_<hash>.o, rebuilt when CONFIG or any of DEPS is newer),
#                                   with the key's -D constants, EMU_ID and what `FLAGS_FN KEY` prints;
#                                   sets emu_objs to the objects and emu_modules to their count
emu_link() {
  local test=$1 link
  link=$(ninja -C "$build" -t commands "$test" | tail -1 | sed 's/^: && //; s/ && :$//')
  link=${link/tests\/CMakeFiles\/$test.dir\/cuda\/$test.cc.o/}
  link=${link/-o tests\/$test/}
  link=${link//\/usr\/lib\/x86_64-linux-gnu\/libgtest_main.a/}
  echo "$link"
}

emu_compile_keys() {
  local keys=$1 config=$2 deps="$2 $3" flags_fn=$4 key defs id o pids=()
  emu_objs=""
  emu_modules=0
  for key in $(cat "$keys"); do
    defs=$(echo "$key" | sed 's/^[^<]*<//; s/>$//' | tr ',' '\n' | grep -v '^$' | sed 's/^/-D/' | tr '\n' ' ')
    id=$(echo "$key $flags" | md5sum | cut -c1-12)
    o=$out/cfg_$id.o
    emu_objs="$emu_objs $o"
    emu_modules=$((emu_modules + 1))
    [ -f "$o" ] && [ -z "$(find $deps -newer "$o")" ] && continue
    # Written under a temporary name, so a failed or interrupted compile leaves no object behind.
    $cxx $flags $defs $($flags_fn "$key") -DEMU_ID=k$id -c "$config" -o "$o.tmp" && mv "$o.tmp" "$o" &
    pids+=($!)
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
