#!/bin/bash
# pyenv not answering (PYENV_ROOT names no directory; the shims on PATH still work):
# 82c371b ("old") vs now, alternating rounds, warm uv cache, the user's pip configuration, --seed
export UV_CACHE_DIR=/tmp/sp/uvcache PYENV_ROOT=/nonexistent
for i in 1 2 3 4 5 6; do
  if [ $((i % 2)) = 1 ]; then order="old now"; else order="now old"; fi
  for t in $order; do
    [ $t = now ] && tf=/tmp/sp/tfv/bin/torchfit || tf=/tmp/sp/tfold/bin/torchfit
    rm -rf /tmp/sp/envab
    s=$(date +%s.%N)
    $tf install torch==2.13.0 --variant cpu --python 3.11 --torch-index-url file:///tmp/sp/simple --prefix /tmp/sp/envab --seed --json > /tmp/sp/ab.json 2>/dev/null
    e=$(date +%s.%N)
    python3 -c "
import json; d=json.load(open('/tmp/sp/ab.json')); t=d['timings']
print('#$i $t', round($e-$s,2), 's', d['plan']['python_path'], {k: t[k] for k in ('venv','resolve','install-early') if k in t}, 'load', open('/proc/loadavg').read().split()[0])"
  done
done
