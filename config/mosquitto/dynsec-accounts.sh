#!/bin/sh
# Write the broker's account file for mosquitto's dynamic-security plugin from the password file:
#
#   dynsec-accounts.sh PASSWORD_FILE DYNSEC_FILE
#
# Why: mosquitto 2.0's acl_file never checks a SUBSCRIBE, so under it alone any account may join
# the archive's shared subscription ($share/<group>/tablectl/+/+/events) and take its share of
# every table's events. The dynamic-security plugin does check subscriptions. mosquitto.conf
# loads it for the accounts (it replaces password_file) and keeps acl_file for every other right.
#
# Every account of PASSWORD_FILE (mosquitto_passwd's PBKDF2-SHA512 "$7$" hashes, copied as they
# are: no password is read here) becomes a client with one role:
#   archive-NAME       tablectl-archive: may subscribe to $share/<group>/tablectl/+/+/events, to
#                      no other $share/ topic
#   every other name   tablectl-no-shared: may subscribe to no $share/ topic at all
# The plugin's default for everything is "no answer", so every other check (which topics an
# account may publish and read, plain subscriptions) is acl_file's, exactly as before. An account
# missing here cannot connect at all (there is no password_file): nothing falls back to a broker
# that lets it in unchecked. No client has a $CONTROL/dynamic-security grant, so nobody changes
# this file over MQTT; it is rewritten here only.
#
# add-user.sh runs this after each new account; run it yourself after mosquitto_passwd changes a
# password or deletes an account. mosquitto reads DYNSEC_FILE only when it starts: restart it
# (systemctl restart mosquitto; a SIGHUP reloads acl_file but not this file).
set -eu
[ $# -eq 2 ] || { sed -n '4p' "$0" >&2; exit 2; }
passwd_file=$1 dynsec_file=$2
[ -f "$passwd_file" ] || { echo "dynsec-accounts.sh: no password file $passwd_file" >&2; exit 2; }

tmp="$dynsec_file.tmp.$$"
trap 'rm -f "$tmp"' EXIT
umask 077
# A user name goes into JSON as it is, so only printable ASCII without '"' or '\' is taken
# (add-user.sh makes no other); a "$6$" hash (mosquitto 1.x) has no PBKDF2 form to copy.
awk -F: '
  function fail(msg) { print "dynsec-accounts.sh: line " NR ": " msg > "/dev/stderr"; bad = 1; exit 2 }
  /^[[:space:]]*$/ { next }
  {
    name = substr($0, 1, length($0) - length($NF) - 1)
    if (name == "" || name ~ /[^ -~]/ || name ~ /["\\]/) fail("a user name that is not plain printable ASCII without \" or \\")
    n = split($NF, h, "$")
    if (n != 5 || h[2] != "7" || h[3] !~ /^[0-9]+$/) fail(name ": not a mosquitto_passwd PBKDF2-SHA512 ($7$) hash; set its password again with mosquitto_passwd")
    role = (name ~ /^archive-[^\/]+$/) ? "tablectl-archive" : "tablectl-no-shared"
    clients = clients sep sprintf("    {\"username\": \"%s\", \"password\": \"%s\", \"salt\": \"%s\", \"iterations\": %d, \"roles\": [{\"rolename\": \"%s\"}]}", name, h[5], h[4], h[3], role)
    sep = ",\n"
  }
  END {
    if (bad) exit 2
    print "{"
    print "  \"defaultACLAccess\": {\"publishClientSend\": false, \"publishClientReceive\": false, \"subscribe\": false, \"unsubscribe\": false},"
    print "  \"roles\": ["
    print "    {\"rolename\": \"tablectl-archive\", \"acls\": ["
    print "      {\"acltype\": \"subscribePattern\", \"topic\": \"$share/+/tablectl/+/+/events\", \"priority\": 1, \"allow\": true},"
    print "      {\"acltype\": \"subscribePattern\", \"topic\": \"$share/#\", \"priority\": 0, \"allow\": false}]},"
    print "    {\"rolename\": \"tablectl-no-shared\", \"acls\": ["
    print "      {\"acltype\": \"subscribePattern\", \"topic\": \"$share/#\", \"allow\": false}]}"
    print "  ],"
    print "  \"groups\": [],"
    print "  \"clients\": ["
    if (clients != "") print clients
    print "  ]"
    print "}"
  }' "$passwd_file" > "$tmp"
# mosquitto reads the file after it has dropped root for its own user: that user owns it, and no
# one else may read the hashes.
if [ "$(id -u)" = 0 ] && id mosquitto >/dev/null 2>&1; then chown mosquitto "$tmp"; fi
mv "$tmp" "$dynsec_file"
trap - EXIT
