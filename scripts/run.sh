#!/usr/bin/env bash
# run.sh — a curl client for the svc Control Plane /v1 API (list, show, import, start, stop, answer, stream, status).
# The token never goes on a command line: every curl call reads its URL, headers and body from a
# config fed on stdin (`curl --config -`), so `ps` and /proc/<pid>/cmdline show no secret.
set -euo pipefail

PROG=${0##*/}
SEGMENT='^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'

usage() {
  cat <<EOF
Usage: $PROG <command> [arguments]

Commands:
  list [--status S] [--verdict V] [--failure F] [--repo R] [--group ID] [--since T] [--until T] [--limit N] [--cursor C]
                                     list runs, newest first (JSON page)
  show <source>/<run>                one run (JSON)
  import /abs/path                   register a project on the Control Plane's machine and read its runs, so
                                     runs may be started there (server must be loopback-bound)
  start --repo /abs/path (--brief TEXT | --spec PATH | --issue URL) [--provider P] [--pr] [--request-id ID]
                                     start a run in an imported project (server must be loopback-bound)
  stop <source>/<run>                stop a run (server must be loopback-bound)
  answer <source>/<run> <text...>    answer a blocked run
  stream [<source>/<run>] [--after ID]
                                     follow events as Server-Sent Events (all runs, or one run)
  status                             is the Control Plane up? (exit 1 when unreachable)

Environment:
  SVC_CONTROL_URL    Control Plane address; else ~/.svc/control/server.json (when its pid is
                     alive), else http://127.0.0.1:\${SVC_CONTROL_PORT:-47821}
  SVC_CONTROL_TOKEN  bearer token, sent via curl's config on stdin, never on a command line

Exit codes: 0 ok, 1 the server refused or could not be reached, 2 usage error.
EOF
}

die_usage() {
  printf '%s: %s\n' "$PROG" "$1" >&2
  printf "Run '%s --help' for usage.\n" "$PROG" >&2
  exit 2
}

die() {
  printf '%s: %s\n' "$PROG" "$1" >&2
  exit 1
}

discover_url() {
  if [ -n "${SVC_CONTROL_URL:-}" ]; then
    printf '%s' "${SVC_CONTROL_URL%/}"
    return
  fi
  local record="${HOME:-}/.svc/control/server.json" url pid
  if [ -r "$record" ]; then
    url=$(sed -n 's/.*"url"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$record")
    pid=$(sed -n 's/.*"pid"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$record")
    if [ -n "$url" ] && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      printf '%s' "${url%/}"
      return
    fi
  fi
  printf 'http://127.0.0.1:%s' "${SVC_CONTROL_PORT:-47821}"
}

# JSON string body (RFC 8259 §7): escape backslash, quote and control characters.
json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  s=$(printf '%s' "$s" | tr -d '\001-\010\013\014\016-\037')
  printf '"%s"' "$s"
}

# A JSON string body (as captured from a response) for a person to read: \" \\ \/ unescaped, \n \r \t \b \f as a space,
# \uXXXX left as written (it may name a control code), and every raw control byte (C0, DEL, C1 in UTF-8) shown as
# U+FFFD, so the server's words never steer the terminal.
json_text() {
  local s=$1 out='' next
  while [ -n "$s" ]; do
    if [ "${s:0:1}" = '\' ]; then
      next=${s:1:1}
      case $next in
        '"'|'\'|/) out+=$next ;;
        u) out+='\u' ;;
        *) out+=' ' ;;
      esac
      s=${s:2}
    else
      out+=${s:0:1}
      s=${s:1}
    fi
  done
  printf '%s' "$out" | LC_ALL=C sed 's/\xc2[\x80-\x9f]/\xef\xbf\xbd/g; s/[\x01-\x1f\x7f]/\xef\xbf\xbd/g'
}

# A value inside a double-quoted curl config parameter: only \ and " need escaping (curl(1), --config).
config_quote() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  printf '"%s"' "$s"
}

# Sets RUN_PATH (no subshell, so a usage error exits the script itself).
run_path() {
  local ref=$1 source run
  case "$ref" in
    */*/*|'') die_usage "invalid run \"$ref\": expected <source>/<run>" ;;
    */*) source=${ref%%/*}; run=${ref#*/} ;;
    *) source=${SVC_SOURCE:-local}; run=$ref ;;
  esac
  [[ $source =~ $SEGMENT && $run =~ $SEGMENT ]] || die_usage "invalid run \"$ref\": expected <source>/<run>"
  RUN_PATH="/v1/runs/$source/$run"
}

# Writes the curl config for one request to stdout: url, auth header, and extra lines given as arguments.
curl_config() {
  local url=$1
  shift
  printf 'url = %s\n' "$(config_quote "$BASE$url")"
  if [ -n "${SVC_CONTROL_TOKEN:-}" ]; then
    printf 'header = %s\n' "$(config_quote "Authorization: Bearer $SVC_CONTROL_TOKEN")"
  fi
  local line
  for line in "$@"; do printf '%s\n' "$line"; done
}

# request METHOD PATH [BODY_JSON] [config lines...]: prints the body on 2xx, else the server's message.
request() {
  local method=$1 path=$2 body=${3:-}
  shift 3 || shift $#
  local out="$TMP_DIR/response" status rc=0
  local extra=("request = $(config_quote "$method")" 'header = "Accept: application/json"')
  if [ -n "$body" ]; then
    extra+=('header = "Content-Type: application/json"' "data-binary = $(config_quote "$body")")
  fi
  status=$(curl_config "$path" "${extra[@]}" "$@" |
    curl --silent --show-error --connect-timeout 5 --max-time 60 --output "$out" --write-out '%{http_code}' \
      --config -) || rc=$?
  if [ "$rc" -ne 0 ]; then
    die "cannot reach the Control Plane at $BASE (curl exit $rc)"
  fi
  if [ "${status:0:1}" != 2 ]; then
    local message code
    message=$(sed -n 's/.*"message"[[:space:]]*:[[:space:]]*"\(\([^"\\]\|\\.\)*\)".*/\1/p' "$out" | head -n 1)
    code=$(sed -n 's/.*"code"[[:space:]]*:[[:space:]]*"\([a-z_]*\)".*/\1/p' "$out" | head -n 1)
    message=$(json_text "$message")
    die "${message:-HTTP $status} ($status${code:+ $code})"
  fi
  cat "$out"
  [ -z "$(tail -c 1 "$out")" ] || printf '\n'
}

cmd_list() {
  local params=() flag value key
  while [ $# -gt 0 ]; do
    flag=$1
    case "$flag" in
      --status|--verdict|--failure|--repo|--since|--until|--limit|--cursor) key=${flag#--} ;;
      --group) key=group_id ;;
      *) die_usage "unknown list option \"$flag\"" ;;
    esac
    [ $# -ge 2 ] || die_usage "$flag needs a value"
    value=$2
    shift 2
    params+=("data-urlencode = $(config_quote "$key=$value")")
  done
  request GET /v1/runs '' get "${params[@]}"
}

cmd_start() {
  local repo='' input='' provider='' pr='' request_id=''
  while [ $# -gt 0 ]; do
    case "$1" in
      --pr) pr=true; shift; continue ;;
      --repo|--brief|--spec|--issue|--provider|--request-id) [ $# -ge 2 ] || die_usage "$1 needs a value" ;;
      *) die_usage "unknown start option \"$1\"" ;;
    esac
    case "$1" in
      --repo) repo=$2 ;;
      --brief) input="\"brief\":$(json_string "$2")" ;;
      --spec) input="\"spec_path\":$(json_string "$2")" ;;
      --issue) input="\"issue_url\":$(json_string "$2")" ;;
      --provider) provider=$2 ;;
      --request-id) request_id=$2 ;;
    esac
    shift 2
  done
  [ -n "$repo" ] || die_usage 'start needs --repo /abs/path'
  [ -n "$input" ] || die_usage 'start needs one of --brief, --spec or --issue'
  local body="{$input,\"repo\":$(json_string "$repo")"
  [ -z "$provider" ] || body+=",\"provider\":$(json_string "$provider")"
  [ -z "$pr" ] || body+=',"pr":true'
  [ -z "$request_id" ] || body+=",\"request_id\":$(json_string "$request_id")"
  request POST /v1/start "$body}"
}

cmd_stream() {
  local path=/v1/stream after=''
  while [ $# -gt 0 ]; do
    case "$1" in
      --after) [ $# -ge 2 ] || die_usage '--after needs a value'; after=$2; shift 2 ;;
      -*) die_usage "unknown stream option \"$1\"" ;;
      *) run_path "$1"; path="$RUN_PATH/stream"; shift ;;
    esac
  done
  [ -z "$after" ] || [[ $after =~ ^[0-9]+$ ]] || die_usage "--after must be an event id (got \"$after\")"
  # A cheap authenticated call first, so a bad token or unknown run reads as the server's message.
  if [ "$path" = /v1/stream ]; then request GET /v1/runs '' get 'data-urlencode = "limit=1"' >/dev/null
  else request GET "${path%/stream}" >/dev/null; fi
  local extra=('header = "Accept: text/event-stream"' 'no-buffer' 'fail')
  [ -z "$after" ] || extra+=("header = \"Last-Event-ID: $after\"" 'get' "data-urlencode = \"after=$after\"")
  local rc=0
  curl_config "$path" "${extra[@]}" | curl --silent --show-error --connect-timeout 5 --config - || rc=$?
  # curl reports 18 (partial file) when the server ends an open stream, e.g. on shutdown.
  case "$rc" in 0|18) exit 0 ;; *) die "stream from $BASE ended with curl exit $rc" ;; esac
}

cmd_status() {
  local health rc=0
  health=$(request GET /health) || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  printf 'Control Plane at %s is up: %s\n' "$BASE" "$health"
}

main() {
  [ $# -gt 0 ] || { usage >&2; exit 2; }
  case "$1" in -h|--help|help) usage; exit 0 ;; esac
  local cmd=$1
  shift
  for arg in "$@"; do
    case "$arg" in -h|--help) usage; exit 0 ;; esac
  done
  command -v curl >/dev/null 2>&1 || die 'curl is not installed'
  BASE=$(discover_url)
  TMP_DIR=$(mktemp -d)
  trap 'rm -rf "$TMP_DIR"' EXIT
  case "$cmd" in
    list) cmd_list "$@" ;;
    show) [ $# -eq 1 ] || die_usage 'show needs exactly one <source>/<run>'; run_path "$1"; request GET "$RUN_PATH" ;;
    import)
      [ $# -eq 1 ] || die_usage 'import needs exactly one /abs/path'
      request POST /v1/import "{\"path\":$(json_string "$1")}"
      ;;
    start) cmd_start "$@" ;;
    stop)
      [ $# -eq 1 ] || die_usage 'stop needs exactly one <source>/<run>'
      run_path "$1"; request POST "$RUN_PATH/stop" '{}' ;;
    answer)
      [ $# -ge 2 ] || die_usage 'answer needs <source>/<run> and the answer text'
      run_path "$1"
      shift
      request POST "$RUN_PATH/answer" "{\"answer\":$(json_string "$*")}"
      ;;
    stream) cmd_stream "$@" ;;
    status) [ $# -eq 0 ] || die_usage 'status takes no arguments'; cmd_status ;;
    *) die_usage "unknown command \"$cmd\"" ;;
  esac
}

main "$@"
