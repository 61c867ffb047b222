#!/bin/sh
# Add a broker account to a mosquitto password file (and, for a floor, monitor or archive account,
# its block to the ACL), then write the dynamic-security account file from the password file
# (dynsec-accounts.sh: only archive accounts may join the archive's shared subscription).
# Recipe for docs/mqtt.md "Security".
#
#   add-user.sh PASSWORD_FILE ACL_FILE DYNSEC_FILE table   SITE/TABLE    # an appliance, e.g. example-floor/dab-01
#   add-user.sh PASSWORD_FILE ACL_FILE DYNSEC_FILE floor   floor-NAME    # may send commands
#   add-user.sh PASSWORD_FILE ACL_FILE DYNSEC_FILE monitor monitor-NAME  # read-only
#   add-user.sh PASSWORD_FILE ACL_FILE DYNSEC_FILE archive archive-NAME  # tablectl archive: events in, its alarms out
#
# SITE, TABLE and NAME are 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit
# (each is one MQTT topic level: never '/', '+', '#'). TABLE is never "archive": the topics
# tablectl/<site>/archive/ are the archive's, and the ACL denies them to every table account.
# An existing account is refused: change its password with mosquitto_passwd, so that a typo here
# never replaces someone's password.
#
# The password is taken from $TABLECTL_NEW_PASSWORD, or a random one is made and printed once
# (give it to the appliance as TABLECTL_MQTT_PASSWORD). mosquitto_passwd -b has the password on
# its own command line for a moment: run this on the broker host, not on a shared machine.
# Restart mosquitto afterwards (systemctl restart mosquitto): it reads DYNSEC_FILE, which holds
# the accounts it lets in, only when it starts.
set -eu
usage() { sed -n '7,10p' "$0" >&2; exit 2; }
refuse() { echo "add-user.sh: $*" >&2; exit 2; }
[ $# -eq 5 ] || usage
passwd_file=$1 acl_file=$2 dynsec_file=$3 role=$4 name=$5

# One topic level: no '/', '+', '#', space, control character or newline (grep reads lines).
level() {
  case "$1" in *'
'*) return 1 ;; esac
  printf '%s\n' "$1" | grep -Eq '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'
}

case "$role" in
  table)
    case "$name" in */*) ;; *) refuse "appliance names are SITE/TABLE" ;; esac
    site=${name%%/*} table=${name#*/}
    level "$site" && level "$table" || refuse "appliance names are SITE/TABLE, each 1-64 letters, digits, '-', '_' or '.'"
    case "$table" in [Aa][Rr][Cc][Hh][Ii][Vv][Ee]) refuse "'archive' is reserved for the casino's archive, not a table" ;; esac
    ;;
  floor|monitor|archive)
    case "$name" in "$role"-?*) ;; *) refuse "$role names are $role-NAME" ;; esac
    level "$name" || refuse "$role names are $role-NAME: 1-64 letters, digits, '-', '_' or '.' (no '/', '+', '#')"
    ;;
  *) refuse "role is table, floor, monitor or archive" ;;
esac
if [ -f "$passwd_file" ] && cut -d: -f1 "$passwd_file" | grep -Fxq -- "$name"; then
  refuse "$name already has an account; change its password with mosquitto_passwd"
fi
if [ "$role" != table ] && grep -Fxq -- "user $name" "$acl_file" 2>/dev/null; then
  refuse "$name already has a block in $acl_file"
fi

password=${TABLECTL_NEW_PASSWORD:-}
if [ -z "$password" ]; then
  password=$(openssl rand -base64 24)
  printf '%s password: %s\n' "$name" "$password"
fi
[ -f "$passwd_file" ] || { : > "$passwd_file"; chmod 600 "$passwd_file"; }
mosquitto_passwd -b "$passwd_file" "$name" "$password"
case "$role" in
  floor) printf '\nuser %s\ntopic read tablectl/#\ntopic write tablectl/+/+/cmd/+\n' "$name" >> "$acl_file" ;;
  monitor) printf '\nuser %s\ntopic read tablectl/#\n' "$name" >> "$acl_file" ;;
  archive) printf '\nuser %s\ntopic read tablectl/+/+/events\ntopic read tablectl/+/+/status\ntopic read tablectl/+/+/heartbeat\ntopic read tablectl/+/+/cmd/republish/result\ntopic write tablectl/+/+/cmd/republish\ntopic write tablectl/+/archive/alarms\n' "$name" >> "$acl_file" ;;
esac
"$(dirname "$0")/dynsec-accounts.sh" "$passwd_file" "$dynsec_file"
