# Sourced by scripts/test.sh and scripts/demo.sh: `stage NAME` ends the running stage, printing
# one line with its time, and starts NAME (`stage ""` ends the last one).
STAGE_NAME="" STAGE_START=0
stage() {
  [ -n "$STAGE_NAME" ] && echo "-- $STAGE_NAME: $((SECONDS - STAGE_START)) s"
  STAGE_NAME=$1 STAGE_START=$SECONDS
  [ -n "$STAGE_NAME" ] && echo "== $STAGE_NAME =="
  return 0
}
