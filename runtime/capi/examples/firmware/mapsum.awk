# Sums the .text and .rodata input sections linked from libmfc.a in a GNU ld map file (only
# after "Linker script and memory map": the discarded sections come before it). A long section
# name puts its address and size on the next line. Prints ".text .rodata" in bytes.
function hex(s,    i, c, v) {
  v = 0
  s = tolower(s)
  sub(/^0x/, "", s)
  for (i = 1; i <= length(s); i++) {
    c = index("0123456789abcdef", substr(s, i, 1)) - 1
    v = v * 16 + c
  }
  return v
}
/^Linker script and memory map/ { on = 1; next }
!on { next }
{
  if (pending != "") { name = pending; pending = ""; size = $2; file = $3 }
  else if ($1 ~ /^\.(text|rodata)/ && NF == 1) { pending = $1; next }
  else if ($1 ~ /^\.(text|rodata)/ && NF >= 4) { name = $1; size = $3; file = $4 }
  else next
  if (file !~ /libmfc[-a-z]*\.a\(/) next
  if (name ~ /^\.text/) text += hex(size); else rodata += hex(size)
}
END { printf "%d %d\n", text, rodata }
