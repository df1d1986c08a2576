#!/bin/sh
# A job that ignores SIGTERM: the local executor must SIGKILL it after the grace.
trap '' TERM
echo "progress 1" >> "$GPUROOM_PROGRESS_FILE"
while true; do sleep 0.1; done
