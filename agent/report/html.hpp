// `kopt report`: one self-contained HTML file per campaign (inline CSS and
// SVG, no script, no font or image from the network), readable offline and
// attachable to a ticket. Sections: summary, progress (best and per-iteration
// fraction of speed of light against iteration and against wall time),
// per-workload bars (best, seed, baseline, reference), outcome breakdown per
// iteration, technique attribution from the dropout records, results per
// model and per strategy hint (report/models.hpp), tokens and cost
// over time, the lineage tree, the winning kernel's source, the iteration
// table and the campaign's notable events.
//
// Every chart is an <svg class="chart" data-chart="NAME" data-marks="N">
// where N counts the data marks drawn (points, bars, nodes), so that tests
// and scripts can check what was drawn without parsing the drawing.
#pragma once

#include <string>

#include "report/data.hpp"

namespace kopt::report {

struct html_options {
  std::string title;         // default: "kopt campaign N: operator"
  std::string generated_by;  // e.g. "kopt 0.1.0"
  std::string database;      // path shown in the footer
};

std::string html_report(const campaign_data& d, const html_options& o = {});

// "&<>\"'" escaped for HTML text and attributes.
std::string html_escape(const std::string& s);

}  // namespace kopt::report
