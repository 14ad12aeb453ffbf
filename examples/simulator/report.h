// The final table (one column per run, one row per measure, each row saying
// what it means) and the same numbers as JSON for machines.
#pragma once

#include <cstdio>
#include <vector>

#include "run_result.h"
#include "workload.h"

namespace sim {

void print_table(std::FILE *out, const Workload &workload, const std::vector<RunResult> &runs);
void print_json(std::FILE *out, const Workload &workload, const std::vector<RunResult> &runs);

}  // namespace sim
