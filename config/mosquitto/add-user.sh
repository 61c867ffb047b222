#!/bin/sh
# Add a broker account to a mosquitto password file (and, for a floor or monitor account, its
# block to the ACL). Recipe for docs/mqtt.md "Security".
#
#   add-user.sh PASSWORD_FILE ACL_FILE table   SITE/TABLE     # an appliance, e.g. example-floor/dab-01
#   add-user.sh PASSWORD_FILE ACL_FILE floor   floor-NAME     # may send commands
#   add-user.sh PASSWORD_FILE ACL_FILE monitor monitor-NAME   # read-only
#   add-user.sh PASSWORD_FILE ACL_FILE archive archive-NAME   # an archive worker
#
# The password is taken from $TABLECTL_NEW_PASSWORD, or a random one is made and printed once
# (give it to the appliance as TABLECTL_MQTT_PASSWORD). mosquitto_passwd -b has the password on
# its own command line for a moment: run this on the broker host, not on a shared machine.
# Send mosquitto SIGHUP afterwards to reload the password file and the ACL.
set -eu
[ $# -eq 4 ] || { sed -n '5,8p' "$0" >&2; exit 2; }
passwd_file=$1 acl_file=$2 role=$3 name=$4
case "$role:$name" in
  table:*/*/*|table:*[+#]*) echo "appliance names are SITE/TABLE" >&2; exit 2 ;;
  table:?*/?*) ;;
  floor:floor-*|monitor:monitor-*|archive:archive-*) case "$name" in */*|*[+#]*) echo "no / + # in $role names" >&2; exit 2 ;; esac ;;
  *) echo "role is table, floor, monitor or archive; their names start floor-, monitor-, archive-" >&2; exit 2 ;;
esac
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
  archive) printf '\nuser %s\ntopic read tablectl/+/+/events\ntopic read tablectl/+/+/cmd/republish/result\ntopic write tablectl/+/+/cmd/republish\ntopic write tablectl/+/archive/alarms\n' "$name" >> "$acl_file" ;;
esac
