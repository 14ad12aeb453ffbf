// Draws the runs' timelines as a hand-written SVG: the prompt hit rate over
// time (top) and the cache's occupancy over time (bottom), one colour per run.
#pragma once

#include <string>
#include <vector>

#include "run_result.h"

namespace sim {

// Writes the plot to `path`; returns false and sets `error` on failure.
bool write_svg_plot(const std::string &path, const std::string &title,
                    const std::vector<RunResult> &runs, std::string &error);

}  // namespace sim
