#pragma once
// Desirable configurations (mu-cuDNN §III-C1): the Pareto front of a kernel's
// configurations in (time, workspace). A configuration is undesirable when
// another one is no slower and needs no more workspace (and is strictly
// better in one of the two); the WD integer program never needs an
// undesirable one (§III-C1, proof), so only the front becomes ILP variables.
//
// The front is built by the WR dynamic program with sets in place of minima:
//   D(b) = P( {[μ] : μ a micro-configuration of size b}
//             ∪ {c1 ++ c2 : c1 ∈ D(b'), c2 ∈ D(b − b'), 0 < b' < b} )
// where P keeps the Pareto front. Pruning inside the recursion is exact:
// time (sum) and workspace (max) of c1 ++ c2 are monotone in those of c1 and
// c2, so a dominated part only makes dominated wholes.

#include <cstdint>
#include <limits>
#include <vector>

#include "planner/microbatch/batch_size_policy.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/configuration.h"

namespace mplan::microbatch {

// The Pareto front of `configurations`: ascending workspace, strictly
// descending time. Of configurations equal in both, the one with the fewest
// micro-batches is kept (then the first given). Times within a relative 1e-9
// count as equal (floating-point sums of the same terms).
std::vector<Configuration> pareto_front(std::vector<Configuration> configurations);

// The desirable set D(batch) of a kernel under `policy`, leaving out
// configurations whose workspace exceeds `workspace_limit_bytes` (WD passes
// the whole pool: no kernel can use more). Ascending workspace, strictly
// descending time; the last element is WR's optimum under the same limit.
// Empty when nothing fits the limit.
std::vector<Configuration> desirable_configurations(
    const BenchmarkTable& table, int64_t batch, BatchSizePolicy policy,
    int64_t workspace_limit_bytes = std::numeric_limits<int64_t>::max());

}  // namespace mplan::microbatch
