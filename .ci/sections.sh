# Sourced by the CI scripts: `section NAME` prints `== NAME`, closes the previous section with
# `(took N s)` (bash SECONDS, whole seconds) and records it; `sections_summary` closes the last
# one and, in the outermost script, prints the table of sections and seconds. A script run by
# another (CI_SECTIONS_FILE inherited) adds its sections to the caller's table, indented, and
# prints no table of its own.
if [ -z "${CI_SECTIONS_FILE:-}" ]; then
  CI_SECTIONS_FILE=$(mktemp)
  export CI_SECTIONS_FILE
  _sections_owner=1
  _sections_indent=""
else
  _sections_owner=""
  _sections_indent="  "
fi
_section_name=""
_section_start=$SECONDS
_sections_begin=$SECONDS

_section_close() {
  if [ -n "$_section_name" ]; then
    local took=$((SECONDS - _section_start))
    echo "   (took $took s: $_section_name)"
    printf '%6d  %s%s\n' "$took" "$_sections_indent" "$_section_name" >> "$CI_SECTIONS_FILE"
  fi
  _section_name=""
}

section() {
  _section_close
  _section_name="$1"
  _section_start=$SECONDS
  echo "== $1"
}

# Call from the EXIT trap: closes the last section (also when a step failed) and prints the table.
sections_summary() {
  local status=$?
  _section_close
  if [ -n "$_sections_owner" ]; then
    echo "== sections (seconds, wall clock; indented lines are parts of the line below them)"
    cat "$CI_SECTIONS_FILE"
    printf '%6d  total\n' "$((SECONDS - _sections_begin))"
    rm -f "$CI_SECTIONS_FILE"
  fi
  return $status
}
