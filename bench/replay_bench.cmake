# replay_bench: replay time of one kernel against its original time, plus the
# restored bytes over device-to-device bandwidth. Included from
# bench/CMakeLists.txt when the GPU parts are built; run by hand on a GPU.
gpurr_embed_cuda_image(_replay_bench_image replayBenchImage ${CMAKE_CURRENT_LIST_DIR}/replay_bench_kernel.cu)
add_executable(replay_bench ${CMAKE_CURRENT_LIST_DIR}/replay_bench.cpp ${_replay_bench_image})
target_link_libraries(replay_bench PRIVATE gpurr_replayer)
