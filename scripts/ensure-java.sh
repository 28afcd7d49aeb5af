#!/usr/bin/env bash
# Spark needs Java 17+. Install Debian's headless JRE when missing and we are root;
# otherwise stop with a message that says what to do.
set -euo pipefail

java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-java: installing openjdk-17-jre-headless" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "ensure-java: Java 17 or newer is required (Spark runs on the JVM)." >&2
echo "  Install it, e.g. 'sudo apt-get install openjdk-17-jre-headless', then retry." >&2
exit 1
