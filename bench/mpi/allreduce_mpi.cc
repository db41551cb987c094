// bench_allreduce_mpi: Open MPI's MPI_Allreduce at the sizes of bench_comm, for the choice of
// the CPU communicator (docs/perf.md, "Communicators"). Built only where MPI is found
// (apt-get install libopenmpi-dev; not a project dependency):
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/bench/bench_allreduce_mpi
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int iters = 2000;
  for (int batch : {1, 4, 16, 64}) {
    const int n = 1024 * batch;
    std::vector<float> buf(size_t(n), 1.f);
    std::vector<double> us;
    for (int i = 0; i < iters + iters / 10; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (i >= iters / 10)
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    if (rank == 0)
      std::printf("%-20s %-15s world %d %7d floats  p50 %8.1f us  p10 %8.1f  p90 %8.1f\n", "openmpi",
                  "all_reduce", world, n, us[us.size() / 2], us[us.size() / 10], us[us.size() * 9 / 10]);
  }
  MPI_Finalize();
  return 0;
}
