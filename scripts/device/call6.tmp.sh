mkdir -p /tmp/u && tar -C /tmp/u -xzf .device/bundle.tgz
export LD_LIBRARY_PATH=/tmp/u/lib:/usr/local/cuda/lib64
timeout 200 /tmp/u/bin/gpu_kernels_test --gtest_filter='*PagedAttention*:*KvFp8*:*RopeKv*' > $OUT/tests.log 2>&1; echo "kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran" $OUT/tests.log | head -5
BENCH_TIMEOUT=90 bash scripts/device/arms.sh run "CUR RCP" "decode-8b-bf16 --batches 1 --kv_cache_dtype fp8" 2>&1 | grep -E "^==|decode_tok"
ls /usr/local/cuda/bin | grep -i -E "nsys|ncu" | head -3
