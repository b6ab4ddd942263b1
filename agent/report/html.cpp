#include "report/html.hpp"
#include "report/models.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace kopt::report {

using nlohmann::json;

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

namespace {

std::string f(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string esc(const std::string& s) {
  return html_escape(s);
}

std::string human_int(std::int64_t v) {
  if (v >= 10'000'000) return f(static_cast<double>(v) / 1e6, 0) + "M";
  if (v >= 1'000'000) return f(static_cast<double>(v) / 1e6, 1) + "M";
  if (v >= 10'000) return f(static_cast<double>(v) / 1e3, 0) + "k";
  if (v >= 1'000) return f(static_cast<double>(v) / 1e3, 1) + "k";
  return std::to_string(v);
}

std::string duration(double s) {
  if (s < 120) return f(s, s < 10 ? 1 : 0) + " s";
  if (s < 7200) return f(s / 60, 1) + " min";
  return f(s / 3600, 1) + " h";
}

std::string time_ns(const std::optional<double>& ns) {
  if (!ns) return "-";
  if (*ns >= 1e6) return f(*ns / 1e6, 3) + " ms";
  if (*ns >= 1e3) return f(*ns / 1e3, 2) + " µs";
  return f(*ns, 0) + " ns";
}

// A 1, 2, 2.5, 5 x 10^k step that splits [lo, hi] into about `target` parts.
double nice_step(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  return 10 * mag;
}

// Tick values in [lo, hi] on a nice step.
std::vector<double> ticks(double lo, double hi, int target = 5) {
  if (!(hi > lo)) hi = lo + 1;
  const double step = nice_step(lo, hi, target);
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

// The smallest multiple of a nice step at or above v (an axis top).
double nice_top(double v) {
  if (!(v > 0)) return 1;
  const double step = nice_step(0, v, 5);
  return std::ceil(v / step - 1e-9) * step;
}

std::string tick_label(double v) {
  for (int digits = 0; digits < 4; ++digits) {
    const double scale = std::pow(10.0, digits);
    if (std::abs(v * scale - std::round(v * scale)) < 1e-6) return f(v, digits);
  }
  return f(v, 4);
}

// A plot area inside an SVG of w x h with margins; maps data to pixels.
struct plot {
  double w = 560, h = 300, ml = 56, mr = 18, mt = 18, mb = 46;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  double px(double x) const { return ml + (x - x0) / (x1 - x0) * (w - ml - mr); }
  double py(double y) const { return h - mb - (y - y0) / (y1 - y0) * (h - mt - mb); }
  double left() const { return ml; }
  double right() const { return w - mr; }
  double top() const { return mt; }
  double bottom() const { return h - mb; }
};

std::string svg_open(const std::string& name, const plot& p, std::size_t marks,
                     const std::string& label) {
  std::ostringstream o;
  o << "<svg class=\"chart\" data-chart=\"" << name << "\" data-marks=\"" << marks
    << "\" role=\"img\" aria-label=\"" << esc(label) << "\" viewBox=\"0 0 " << f(p.w, 0) << " "
    << f(p.h, 0) << "\" width=\"" << f(p.w, 0) << "\" height=\"" << f(p.h, 0)
    << "\" xmlns=\"http://www.w3.org/2000/svg\">";
  return o.str();
}

// Grid, tick labels and axis titles.
std::string axes(const plot& p, const std::vector<double>& xt, const std::vector<double>& yt,
                 const std::string& xtitle, const std::string& ytitle,
                 const std::string& ysuffix = "") {
  std::ostringstream o;
  o << "<g class=\"grid\">";
  for (double y : yt)
    o << "<line x1=\"" << f(p.left()) << "\" x2=\"" << f(p.right()) << "\" y1=\"" << f(p.py(y))
      << "\" y2=\"" << f(p.py(y)) << "\"/>";
  o << "</g><g class=\"tick\">";
  for (double y : yt)
    o << "<text x=\"" << f(p.left() - 8) << "\" y=\"" << f(p.py(y) + 4) << "\" text-anchor=\"end\">"
      << tick_label(y) << ysuffix << "</text>";
  for (double x : xt)
    o << "<text x=\"" << f(p.px(x)) << "\" y=\"" << f(p.bottom() + 18)
      << "\" text-anchor=\"middle\">" << tick_label(x) << "</text>";
  o << "</g><line class=\"axis\" x1=\"" << f(p.left()) << "\" x2=\"" << f(p.right()) << "\" y1=\""
    << f(p.bottom()) << "\" y2=\"" << f(p.bottom()) << "\"/>";
  o << "<text class=\"atitle\" x=\"" << f((p.left() + p.right()) / 2) << "\" y=\"" << f(p.h - 8)
    << "\" text-anchor=\"middle\">" << esc(xtitle) << "</text>";
  o << "<text class=\"atitle\" transform=\"translate(14," << f((p.top() + p.bottom()) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(ytitle) << "</text>";
  return o.str();
}

std::string empty_chart(const std::string& name, const std::string& message, double w = 560,
                        double h = 120) {
  plot p;
  p.w = w;
  p.h = h;
  return svg_open(name, p, 0, message) + "<rect class=\"empty\" x=\"1\" y=\"1\" width=\"" +
         f(w - 2) + "\" height=\"" + f(h - 2) + "\" rx=\"8\"/><text class=\"muted\" x=\"" +
         f(w / 2) + "\" y=\"" + f(h / 2 + 5) + "\" text-anchor=\"middle\">" + esc(message) +
         "</text></svg>";
}

struct color_of_outcome {
  const char* fill;
  const char* node;
  const char* label;
};

color_of_outcome outcome_colors(outcome o) {
  switch (o) {
    case outcome::compile_error:
      // Orange, far from the yellow of "path to the best" (#fde68a).
      return {"#ea580c", "#ffedd5", "compile error"};
    case outcome::incorrect:
      return {"#dc2626", "#fee2e2", "incorrect / crashed"};
    case outcome::integrity:
      return {"#7c3aed", "#ede9fe", "integrity rejection"};
    case outcome::slower:
      return {"#cbd5e1", "#f8fafc", "slower than parent"};
    case outcome::faster:
      return {"#16a34a", "#bbf7d0", "faster than parent"};
    case outcome::correct:
      return {"#38bdf8", "#e0f2fe", "correct (no comparison)"};
    case outcome::not_run:
      return {"#e5e7eb", "#ffffff", "not evaluated"};
    case outcome::start:
      return {"#64748b", "#e2e8f0", "start (seed, baseline, reference)"};
  }
  return {"#000", "#fff", "?"};
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& items,
                   const std::string& shape = "box") {
  std::ostringstream o;
  o << "<div class=\"legend\">";
  for (const auto& [color, label] : items)
    o << "<span><i class=\"" << shape << "\" style=\"background:" << color << "\"></i>"
      << esc(label) << "</span>";
  o << "</div>";
  return o.str();
}

// --- progress -------------------------------------------------------------------

std::string progress_chart(const campaign_data& d, bool by_time) {
  const std::string name = by_time ? "progress-time" : "progress-iteration";
  struct pt {
    double x, y;
  };
  std::vector<pt> inc, best_of_it, cands;
  double xmax = 0, ymax = 0;
  double unit = 1;
  std::string unit_name = "iteration";
  if (by_time) {
    double total = 0;
    for (const auto& iv : d.iterations)
      if (iv.elapsed_s) total = std::max(total, *iv.elapsed_s);
    if (total < 120) {
      unit = 1;
      unit_name = "wall time (s)";
    } else if (total < 7200) {
      unit = 60;
      unit_name = "wall time (min)";
    } else {
      unit = 3600;
      unit_name = "wall time (h)";
    }
  }
  for (const auto& iv : d.iterations) {
    double x;
    if (by_time) {
      if (!iv.elapsed_s) continue;
      x = *iv.elapsed_s / unit;
    } else {
      x = static_cast<double>(iv.number);
    }
    xmax = std::max(xmax, x);
    if (iv.incumbent_score) {
      inc.push_back({x, *iv.incumbent_score * 100});
      ymax = std::max(ymax, *iv.incumbent_score * 100);
    }
    if (iv.best_score) best_of_it.push_back({x, *iv.best_score * 100});
    for (auto id : iv.candidates) {
      const auto& v = d.views.at(id);
      if (v.score && v.result != outcome::start) {
        cands.push_back({x, *v.score * 100});
        ymax = std::max(ymax, *v.score * 100);
      }
    }
  }
  if (inc.empty() && cands.empty())
    return empty_chart(name, "no candidate was measured on every workload yet");
  const double target = d.campaign.settings.value("target_sol_fraction", 0.0) * 100;
  plot p;
  p.x0 = 0;
  p.x1 = std::max(xmax, by_time ? 1e-3 : 1.0);
  p.y0 = 0;
  p.y1 = std::min(
      100.0, nice_top(std::max(ymax * 1.12, target > 0 && target <= 100 ? target * 1.05 : 0.0)));
  if (by_time) p.x1 = nice_top(p.x1);
  auto xt = ticks(p.x0, p.x1, by_time ? 6 : std::min(10, static_cast<int>(p.x1) + 1));
  if (!by_time)
    xt.erase(std::remove_if(xt.begin(), xt.end(),
                            [](double v) { return std::abs(v - std::round(v)) > 1e-9; }),
             xt.end());
  const auto yt = ticks(p.y0, p.y1, 5);
  std::ostringstream o;
  o << svg_open(name, p, inc.size() + cands.size(),
                by_time ? "best fraction of speed of light against wall time"
                        : "best fraction of speed of light per iteration");
  o << axes(p, xt, yt, unit_name, "fraction of speed of light", "%");
  const char* line = by_time ? "#4f46e5" : "#2563eb";
  const char* area = by_time ? "#e0e7ff" : "#dbeafe";
  if (!inc.empty()) {
    // Step line: the incumbent holds until the next promotion.
    std::ostringstream path;
    path << "M" << f(p.px(inc[0].x)) << "," << f(p.py(inc[0].y));
    for (std::size_t i = 1; i < inc.size(); ++i)
      path << " H" << f(p.px(inc[i].x)) << " V" << f(p.py(inc[i].y));
    o << "<path class=\"area\" fill=\"" << area << "\" d=\"" << path.str() << " V" << f(p.bottom())
      << " H" << f(p.px(inc[0].x)) << " Z\"/>";
    o << "<path fill=\"none\" stroke=\"" << line << "\" stroke-width=\"2.5\" d=\"" << path.str()
      << "\"/>";
  }
  if (target > 0 && target <= p.y1) {
    o << "<line class=\"target\" x1=\"" << f(p.left()) << "\" x2=\"" << f(p.right()) << "\" y1=\""
      << f(p.py(target)) << "\" y2=\"" << f(p.py(target)) << "\"/><text class=\"tlabel\" x=\""
      << f(p.right() - 4) << "\" y=\"" << f(p.py(target) - 5) << "\" text-anchor=\"end\">target "
      << f(target, 0) << " %</text>";
  }
  for (const auto& c : cands)
    o << "<circle class=\"cand\" cx=\"" << f(p.px(c.x)) << "\" cy=\"" << f(p.py(c.y))
      << "\" r=\"3.5\"/>";
  for (const auto& c : best_of_it)
    o << "<circle class=\"itbest\" cx=\"" << f(p.px(c.x)) << "\" cy=\"" << f(p.py(c.y))
      << "\" r=\"4.5\"><title>best of iteration: " << f(c.y, 1) << " %</title></circle>";
  for (const auto& c : inc)
    o << "<circle fill=\"" << line << "\" cx=\"" << f(p.px(c.x)) << "\" cy=\"" << f(p.py(c.y))
      << "\" r=\"2.5\"><title>best so far: " << f(c.y, 1) << " %</title></circle>";
  o << "</svg>";
  o << legend({{line, "best so far"},
               {"#475569", "best of the iteration"},
               {"#cbd5e1", "other candidates (full sweep)"}},
              "dot");
  return o.str();
}

// --- per-workload bars -----------------------------------------------------------

std::string workload_chart(const campaign_data& d, std::string& table_html) {
  struct series {
    std::string label, color;
    const candidate_view* v;
  };
  std::vector<series> ss;
  if (d.campaign.best_candidate_id)
    if (const auto* b = d.view(*d.campaign.best_candidate_id))
      ss.push_back({"best (candidate " + std::to_string(b->rec->id) + ")", "#0f766e", b});
  for (auto [o, label, color] :
       {std::tuple{store::candidate_origin::seed, "seed", "#5eead4"},
        std::tuple{store::candidate_origin::baseline, "baseline", "#94a3b8"},
        std::tuple{store::candidate_origin::reference, "reference", "#c4b5fd"}}) {
    const auto* v = d.by_origin(o);
    if (v && (ss.empty() || ss[0].v != v)) ss.push_back({label, color, v});
  }
  std::vector<std::map<std::string, measure>> ms;
  for (const auto& s : ss) ms.push_back(s.v->best_measures());
  double ymax = 0;
  std::size_t marks = 0;
  for (const auto& m : ms)
    for (const auto& [k, x] : m)
      if (x.status == store::eval_status::ok && x.sol) ymax = std::max(ymax, *x.sol * 100);
  // The table: median times, and the best against the baseline.
  std::ostringstream t;
  t << "<table class=\"data\"><thead><tr><th>workload</th><th class=\"r\">weight</th>";
  for (const auto& s : ss) t << "<th class=\"r\">" << esc(s.label) << "</th>";
  const candidate_view* base = nullptr;
  for (const auto& s : ss)
    if (s.label == "baseline") base = s.v;
  if (base && !ss.empty() && ss[0].v != base) t << "<th class=\"r\">best vs baseline</th>";
  t << "</tr></thead><tbody>";
  for (const auto& w : d.workloads) {
    t << "<tr><td>" << esc(w.key) << "</td><td class=\"r\">" << f(w.weight, 3) << "</td>";
    for (const auto& m : ms) {
      auto it = m.find(w.key);
      if (it == m.end()) {
        t << "<td class=\"r muted\">not measured</td>";
      } else if (it->second.status != store::eval_status::ok) {
        t << "<td class=\"r bad\">" << esc(std::string(store::to_string(it->second.status)))
          << "</td>";
      } else {
        t << "<td class=\"r\">" << time_ns(it->second.median_ns) << " <span class=\"muted\">"
          << pct(it->second.sol);
        if (it->second.attainable) t << " · " << pct(it->second.attainable) << " attainable";
        t << "</span></td>";
      }
    }
    if (base && !ss.empty() && ss[0].v != base) {
      auto a = ms[0].find(w.key);
      auto bm = base->best_measures();
      auto b = bm.find(w.key);
      if (a != ms[0].end() && b != bm.end() && a->second.median_ns && b->second.median_ns &&
          a->second.status == store::eval_status::ok &&
          b->second.status == store::eval_status::ok) {
        const double sp = *b->second.median_ns / *a->second.median_ns;
        t << "<td class=\"r " << (sp >= 1 ? "good" : "bad") << "\">" << f(sp, 2) << "×</td>";
      } else {
        t << "<td class=\"r muted\">-</td>";
      }
    }
    t << "</tr>";
  }
  // Weighted totals of both fractions (the score; attainable where the
  // timings carry the measured launch floor).
  t << "<tr><td><b>weighted</b></td><td></td>";
  for (const auto& s : ss) {
    t << "<td class=\"r\">" << pct(s.v->score) << " <span class=\"muted\">of SOL";
    if (s.v->attainable_score) t << " · " << pct(s.v->attainable_score) << " attainable";
    t << "</span></td>";
  }
  if (base && !ss.empty() && ss[0].v != base) t << "<td></td>";
  t << "</tr>";
  t << "</tbody></table>";
  bool any_floor = false;
  for (const auto& m : ms)
    for (const auto& [k, x] : m) any_floor = any_floor || x.attainable.has_value();
  if (any_floor)
    t << "<p class=\"muted\">attainable = max(T<sub>SOL</sub>, measured launch floor) / T: how "
         "close a workload is to what one launch allows; physical SOL beside it.</p>";
  table_html = t.str();
  if (ss.empty() || !(ymax > 0))
    return empty_chart("workloads", "no per-workload measurement with a speed-of-light figure");

  plot p;
  p.w = 1160;
  p.h = 320;
  p.mb = 64;
  p.y1 = std::min(100.0, nice_top(ymax * 1.1));
  const double band =
      (p.right() - p.left()) / static_cast<double>(std::max<std::size_t>(d.workloads.size(), 1));
  const double bw = std::min(34.0, band * 0.8 / static_cast<double>(ss.size()));
  std::ostringstream o;
  std::ostringstream bars;
  for (std::size_t wi = 0; wi < d.workloads.size(); ++wi) {
    const auto& w = d.workloads[wi];
    const double cx = p.left() + band * (static_cast<double>(wi) + 0.5);
    const double x0 = cx - bw * static_cast<double>(ss.size()) / 2;
    for (std::size_t si = 0; si < ss.size(); ++si) {
      auto it = ms[si].find(w.key);
      if (it == ms[si].end() || it->second.status != store::eval_status::ok || !it->second.sol)
        continue;
      const double v = *it->second.sol * 100;
      const double y = p.py(std::min(v, p.y1));
      bars << "<rect fill=\"" << ss[si].color << "\" x=\""
           << f(x0 + bw * static_cast<double>(si) + 1) << "\" y=\"" << f(y) << "\" width=\""
           << f(bw - 2) << "\" height=\"" << f(p.bottom() - y) << "\" rx=\"2\"><title>"
           << esc(ss[si].label) << " on " << esc(w.key) << ": " << f(v, 1)
           << " % of speed of light, " << time_ns(it->second.median_ns) << "</title></rect>";
      ++marks;
    }
    bars << "<text class=\"tick\" x=\"" << f(cx) << "\" y=\"" << f(p.bottom() + 18)
         << "\" text-anchor=\"middle\">" << esc(w.key) << "</text><text class=\"tick muted\" x=\""
         << f(cx) << "\" y=\"" << f(p.bottom() + 32) << "\" text-anchor=\"middle\">w "
         << f(w.weight, 2) << "</text>";
  }
  o << svg_open("workloads", p, marks, "fraction of speed of light per workload");
  o << axes(p, {}, ticks(p.y0, p.y1, 5), "workload (w = weight)", "fraction of speed of light",
            "%");
  o << bars.str() << "</svg>";
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& s : ss) items.emplace_back(s.color, s.label);
  o << legend(items);
  return o.str();
}

// --- outcomes ----------------------------------------------------------------------

std::string outcome_chart(const campaign_data& d) {
  std::vector<const iteration_view*> its;
  std::int64_t ymax = 0;
  for (const auto& iv : d.iterations)
    if (iv.number > 0) {
      its.push_back(&iv);
      std::int64_t n = 0;
      for (const auto& [o, c] : iv.outcomes) n += c;
      ymax = std::max(ymax, n);
    }
  if (its.empty() || ymax == 0)
    return empty_chart("outcomes", "no loop iteration produced candidates yet", 1160);
  plot p;
  p.w = 1160;
  p.h = 280;
  p.y1 = nice_top(static_cast<double>(ymax));
  const double band = (p.right() - p.left()) / static_cast<double>(its.size());
  const double bw = std::max(2.0, std::min(40.0, band * 0.75));
  std::ostringstream bars;
  std::size_t marks = 0;
  for (std::size_t i = 0; i < its.size(); ++i) {
    const double cx = p.left() + band * (static_cast<double>(i) + 0.5);
    double acc = 0;
    for (auto oc : loop_outcomes()) {
      auto it = its[i]->outcomes.find(oc);
      if (it == its[i]->outcomes.end() || it->second == 0) continue;
      const double y_lo = p.py(acc), y_hi = p.py(acc + static_cast<double>(it->second));
      bars << "<rect fill=\"" << outcome_colors(oc).fill << "\" x=\"" << f(cx - bw / 2) << "\" y=\""
           << f(y_hi) << "\" width=\"" << f(bw) << "\" height=\"" << f(y_lo - y_hi)
           << "\"><title>iteration " << its[i]->number << ": " << it->second << " "
           << outcome_colors(oc).label << "</title></rect>";
      acc += static_cast<double>(it->second);
      ++marks;
    }
    if (its[i]->promoted)
      bars << "<text class=\"promo\" x=\"" << f(cx) << "\" y=\"" << f(p.py(acc) - 4)
           << "\" text-anchor=\"middle\">▲</text>";
    for (const auto& e : its[i]->escalations)
      bars << "<line class=\"esc\" x1=\"" << f(cx + band / 2) << "\" x2=\"" << f(cx + band / 2)
           << "\" y1=\"" << f(p.top()) << "\" y2=\"" << f(p.bottom())
           << "\"><title>escalation after iteration " << its[i]->number << ": " << esc(e)
           << "</title></line>";
  }
  const std::size_t every = std::max<std::size_t>(1, its.size() / 20 + 1);
  std::ostringstream labels;
  for (std::size_t i = 0; i < its.size(); i += every)
    labels << "<text class=\"tick\" x=\"" << f(p.left() + band * (static_cast<double>(i) + 0.5))
           << "\" y=\"" << f(p.bottom() + 18) << "\" text-anchor=\"middle\">" << its[i]->number
           << "</text>";
  std::ostringstream o;
  o << svg_open("outcomes", p, marks, "candidate outcomes per iteration");
  o << axes(p, {}, ticks(p.y0, p.y1, std::min<int>(5, static_cast<int>(p.y1))), "iteration",
            "candidates");
  o << bars.str() << labels.str() << "</svg>";
  std::vector<std::pair<std::string, std::string>> items;
  for (auto oc : loop_outcomes())
    items.emplace_back(outcome_colors(oc).fill, outcome_colors(oc).label);
  o << legend(items)
    << "<p class=\"note\">▲ promotion (a new best); dashed line: an escalation step fired after "
       "that iteration.</p>";
  return o.str();
}

// --- attribution --------------------------------------------------------------------

std::string attribution_chart(const campaign_data& d) {
  std::vector<const attribution_row*> rows;
  for (const auto& r : d.attribution) rows.push_back(&r);
  if (rows.empty())
    return empty_chart("attribution", "no dropout decisions recorded (no optional prompt items)",
                       1160);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return std::abs(a->effect()) > std::abs(b->effect());
  });
  if (rows.size() > 24) rows.resize(24);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto* a, const auto* b) { return a->effect() > b->effect(); });
  double mx = 0;
  for (const auto* r : rows) mx = std::max(mx, std::abs(r->effect()) * 100);
  if (!(mx > 0)) mx = 1;
  plot p;
  p.w = 1160;
  const double row_h = 24;
  p.h = 40 + row_h * static_cast<double>(rows.size());
  const double label_w = 330, stats_w = 200;
  const double cx = label_w + (p.w - label_w - stats_w) / 2,
               half = (p.w - label_w - stats_w) / 2 - 10;
  std::ostringstream o;
  o << svg_open("attribution", p, rows.size(),
                "mean gain of the LLM calls that kept an item minus those that dropped it");
  o << "<text class=\"tick\" x=\"" << f(cx - half)
    << "\" y=\"14\">helped less when kept ←</text><text class=\"tick\" x=\"" << f(cx + half)
    << "\" y=\"14\" text-anchor=\"end\">→ helped more when kept</text>";
  o << "<text class=\"tick\" x=\"" << f(p.w - stats_w + 12)
    << "\" y=\"14\">effect · kept/dropped</text>";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto* r = rows[i];
    const double y = 24 + row_h * static_cast<double>(i);
    const double e = r->effect() * 100;
    const double len = std::abs(e) / mx * half;
    o << "<rect class=\"band\" x=\"" << f(label_w) << "\" y=\"" << f(y) << "\" width=\""
      << f(p.w - label_w - stats_w) << "\" height=\"" << f(row_h - 4) << "\" rx=\"3\"/>";
    o << "<text class=\"rlabel\" x=\"" << f(label_w - 8) << "\" y=\"" << f(y + 15)
      << "\" text-anchor=\"end\">"
      << esc(r->item_id.size() > 44 ? r->item_id.substr(0, 43) + "…" : r->item_id) << "<title>"
      << esc(r->item_id) << " (" << esc(r->kind) << ")</title></text>";
    o << "<rect fill=\"" << (e >= 0 ? "#0891b2" : "#e11d48") << "\" x=\""
      << f(e >= 0 ? cx : cx - len) << "\" y=\"" << f(y + 3) << "\" width=\""
      << f(std::max(len, 1.0)) << "\" height=\"" << f(row_h - 10) << "\" rx=\"2\"><title>mean gain "
      << f(r->mean_gain_kept * 100, 2) << " % when kept (" << r->kept << "), "
      << f(r->mean_gain_dropped * 100, 2) << " % when dropped (" << r->dropped
      << ")</title></rect>";
    o << "<text class=\"rlabel\" x=\"" << f(p.w - stats_w + 12) << "\" y=\"" << f(y + 15) << "\">"
      << (e >= 0 ? "+" : "") << f(e, 2) << " pp · " << r->kept << "/" << r->dropped << "</text>";
  }
  o << "<line class=\"axis\" x1=\"" << f(cx) << "\" x2=\"" << f(cx) << "\" y1=\"20\" y2=\""
    << f(p.h - 8) << "\"/>";
  o << "</svg>";
  return o.str();
}

// --- spend --------------------------------------------------------------------------

std::string spend_chart(const campaign_data& d, bool cost) {
  const std::string name = cost ? "cost" : "tokens";
  if (d.spend.empty())
    return empty_chart(name, "no LLM spend recorded (parameter search or no calls yet)");
  const std::int64_t t0 = d.started_ms.value_or(d.spend.front().at_ms);
  double tmax = 0, ymax = 0;
  for (const auto& s : d.spend) {
    tmax = std::max(tmax, static_cast<double>(s.at_ms - t0) / 1000.0);
    ymax = std::max(ymax, cost ? s.cost_usd : static_cast<double>(s.tokens));
  }
  // Calls but nothing to plot (a local model at $0, no token counts): an
  // axis from 0 to 0 says nothing.
  if (!(ymax > 0))
    return empty_chart(name, cost ? "no cost recorded: every LLM call was priced at $0"
                                  : "no tokens recorded for the LLM calls");
  double unit = 1;
  std::string uname = "wall time (s)";
  if (tmax >= 7200) {
    unit = 3600;
    uname = "wall time (h)";
  } else if (tmax >= 120) {
    unit = 60;
    uname = "wall time (min)";
  }
  double yscale = 1;
  std::string ytitle = cost ? "cost (USD)" : "tokens";
  if (!cost && ymax >= 1e6) {
    yscale = 1e6;
    ytitle = "tokens (millions)";
  } else if (!cost && ymax >= 1e4) {
    yscale = 1e3;
    ytitle = "tokens (thousands)";
  }
  plot p;
  p.x1 = nice_top(std::max(tmax / unit, 1e-3));
  p.y1 = nice_top(std::max(ymax / yscale * 1.05, 1e-6));
  const char* line = cost ? "#be185d" : "#c2410c";
  const char* area = cost ? "#fce7f3" : "#ffedd5";
  std::ostringstream path;
  path << "M" << f(p.px(0)) << "," << f(p.py(0));
  for (const auto& s : d.spend) {
    const double x = static_cast<double>(s.at_ms - t0) / 1000.0 / unit;
    const double y = (cost ? s.cost_usd : static_cast<double>(s.tokens)) / yscale;
    path << " H" << f(p.px(std::max(0.0, x))) << " V" << f(p.py(y));
  }
  std::ostringstream o;
  o << svg_open(name, p, d.spend.size(),
                cost ? "cumulative LLM cost over wall time" : "cumulative tokens over wall time");
  o << axes(p, ticks(p.x0, p.x1, 6), ticks(p.y0, p.y1, 5), uname, ytitle);
  o << "<path fill=\"" << area << "\" d=\"" << path.str() << " V" << f(p.bottom()) << " Z\"/>";
  o << "<path fill=\"none\" stroke=\"" << line << "\" stroke-width=\"2.5\" d=\"" << path.str()
    << "\"/>";
  o << "</svg>";
  return o.str();
}

// --- lineage -------------------------------------------------------------------------

std::string lineage_chart(const campaign_data& d) {
  if (d.candidates.empty()) return empty_chart("lineage", "no candidates", 1160);
  // Columns by iteration; within a column, candidates in id order.
  std::map<std::int64_t, std::vector<row_id>> cols;
  for (const auto& c : d.candidates) cols[d.views.at(c.id).iteration.value_or(0)].push_back(c.id);
  std::size_t max_rows = 0;
  for (const auto& [n, ids] : cols) max_rows = std::max(max_rows, ids.size());
  // Columns widen to fill the frame when there are few iterations.
  const double left = 40, top = 30, row_h = 30;
  const double col_w = std::clamp(
      (1160.0 - 2 * left) / static_cast<double>(std::max<std::size_t>(cols.size(), 1)), 44.0, 96.0);
  std::map<std::int64_t, std::size_t> col_index;
  std::size_t ci = 0;
  for (const auto& [n, ids] : cols) col_index[n] = ci++;
  plot p;
  p.w = std::max(1160.0, left * 2 + col_w * static_cast<double>(cols.size()));
  p.h = top + row_h * static_cast<double>(max_rows) + 30;
  std::map<row_id, std::pair<double, double>> pos;
  for (const auto& [n, ids] : cols)
    for (std::size_t i = 0; i < ids.size(); ++i)
      pos[ids[i]] = {left + col_w * static_cast<double>(col_index[n]) + col_w / 2,
                     top + row_h * static_cast<double>(i) + row_h / 2};
  std::ostringstream edges, best_edges, nodes, labels;
  for (const auto& [n, ids] : cols)
    labels << "<text class=\"tick\" x=\""
           << f(left + col_w * static_cast<double>(col_index[n]) + col_w / 2)
           << "\" y=\"16\" text-anchor=\"middle\">"
           << (n == 0 ? std::string("setup") : std::to_string(n)) << "</text>";
  for (const auto& c : d.candidates) {
    const auto& v = d.views.at(c.id);
    const auto [x, y] = pos[c.id];
    if (c.parent_id && pos.count(*c.parent_id)) {
      const auto [px, py] = pos[*c.parent_id];
      const bool best = v.on_best_path && d.views.at(*c.parent_id).on_best_path;
      const double mx = (px + x) / 2;
      (best ? best_edges : edges) << "<path class=\"" << (best ? "bestedge" : "edge") << "\" d=\"M"
                                  << f(px) << "," << f(py) << " C" << f(mx) << "," << f(py) << " "
                                  << f(mx) << "," << f(y) << " " << f(x) << "," << f(y) << "\"/>";
    }
    const auto col = outcome_colors(v.result);
    const bool is_best = d.campaign.best_candidate_id && *d.campaign.best_candidate_id == c.id;
    nodes << "<circle class=\"node" << (v.on_best_path ? " onpath" : "") << "\" cx=\"" << f(x)
          << "\" cy=\"" << f(y) << "\" r=\""
          << (is_best          ? "9"
              : v.on_best_path ? "7.5"
                               : "6")
          << "\" fill=\"" << (v.on_best_path ? "#fde68a" : col.node) << "\" stroke=\""
          << (v.on_best_path                       ? "#b45309"
              : col.fill == std::string("#cbd5e1") ? "#94a3b8"
                                                   : col.fill)
          << "\"><title>candidate " << c.id << " (" << store::to_string(c.origin) << "), "
          << col.label << (v.score ? ", " + pct(v.score) + " of speed of light" : std::string())
          << (v.time_ratio_vs_parent ? ", " + f(1.0 / *v.time_ratio_vs_parent, 2) + "× vs parent"
                                     : std::string())
          << "</title></circle>";
    if (v.on_best_path)
      nodes << "<text class=\"nlabel\" x=\"" << f(x) << "\" y=\"" << f(y - 11)
            << "\" text-anchor=\"middle\">" << c.id << "</text>";
  }
  std::ostringstream o;
  o << svg_open("lineage", p, d.candidates.size(), "candidate lineage by iteration");
  o << labels.str() << edges.str() << best_edges.str() << nodes.str() << "</svg>";
  return o.str();
}

// --- page ------------------------------------------------------------------------------

const char* css = R"CSS(
:root{--fg:#0f172a;--muted:#64748b;--line:#e2e8f0;--card:#ffffff;--bg:#f8fafc;--accent:#2563eb}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Helvetica,Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:28px 32px 48px}
header h1{font-size:24px;margin:0 0 4px;font-weight:650;letter-spacing:-.01em}
header .sub{color:var(--muted)}
.badge{display:inline-block;padding:1px 10px;border-radius:999px;font-size:12px;font-weight:600;vertical-align:middle;margin-left:8px}
.badge.done{background:#dcfce7;color:#166534}.badge.failed{background:#fee2e2;color:#991b1b}
.badge.running{background:#dbeafe;color:#1e40af}.badge.other{background:#f1f5f9;color:#334155}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(136px,1fr));gap:12px;margin:20px 0 8px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.card .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:22px;font-weight:650;margin-top:2px}
.card .s{color:var(--muted);font-size:12px}
section{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin:18px 0}
section h2{font-size:17px;margin:0 0 2px;font-weight:650}
section p.lead{color:var(--muted);margin:0 0 12px}
.row{display:grid;grid-template-columns:1fr 1fr;gap:18px}
.row h3{font-size:14px;margin:0 0 6px;font-weight:600}
svg.chart{display:block;max-width:100%;height:auto;font-size:12px}
svg .grid line{stroke:#eef2f7}
svg .axis{stroke:#94a3b8}
svg .tick,svg .tick text{fill:#64748b;font-size:11px}
svg .atitle{fill:#475569;font-size:12px}
svg .muted{fill:#94a3b8}
svg .empty{fill:#f8fafc;stroke:#e2e8f0;stroke-dasharray:4 4}
svg .cand{fill:#cbd5e1;stroke:#94a3b8;stroke-width:.8}
svg .itbest{fill:#475569}
svg .target{stroke:#94a3b8;stroke-dasharray:6 4}
svg .tlabel{fill:#64748b;font-size:11px}
svg .promo{fill:#16a34a;font-size:10px}
svg .esc{stroke:#a855f7;stroke-dasharray:3 3}
svg .band{fill:#ecfeff}
svg .rlabel{fill:#334155;font-size:12px}
svg .edge{fill:none;stroke:#cbd5e1;stroke-width:1.2}
svg .bestedge{fill:none;stroke:#b45309;stroke-width:2.6}
svg .node{stroke-width:1.6}
svg .nlabel{fill:#92400e;font-size:10px;font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;color:#475569;font-size:12px;margin:8px 0 0}
.legend i{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-2px;border-radius:3px;box-shadow:inset 0 0 0 1px rgba(15,23,42,.2)}
.legend i.dot{border-radius:50%}
p.note{color:var(--muted);font-size:12px;margin:6px 0 0}
details{margin-top:10px}details summary{cursor:pointer;color:#475569;font-size:13px}
table.data{border-collapse:collapse;width:100%;margin-top:12px;font-size:13px}
table.data th,table.data td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
table.data th{color:#475569;font-weight:600;background:#f8fafc}
table.data td.r,table.data th.r{text-align:right}
.muted{color:var(--muted)}.good{color:#15803d}.bad{color:#b91c1c}
.scroll{overflow-x:auto}
pre.code{background:#f6f8fa;border:1px solid var(--line);border-radius:8px;padding:12px 0;overflow:auto;font:12.5px/1.55 ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;margin:10px 0 0}
pre.code span.ln{display:inline-block;width:44px;padding-right:12px;text-align:right;color:#94a3b8;user-select:none}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:8px 0}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0}
footer{color:var(--muted);font-size:12px;margin-top:24px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px}
)CSS";

std::string card(const std::string& k, const std::string& v, const std::string& s = "") {
  return "<div class=\"card\"><div class=\"k\">" + esc(k) + "</div><div class=\"v\">" + esc(v) +
         "</div>" + (s.empty() ? "" : "<div class=\"s\">" + esc(s) + "</div>") + "</div>";
}

}  // namespace

std::string html_report(const campaign_data& d, const html_options& opts) {
  const auto& c = d.campaign;
  const std::string op_name = d.op ? d.op->name : c.operator_name;
  const std::string title =
      opts.title.empty() ? "kopt campaign " + std::to_string(c.id) + ": " + op_name : opts.title;
  std::ostringstream o;
  o << "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
       "content=\"width=device-width,initial-scale=1\"><title>"
    << esc(title) << "</title><style>" << css << "</style></head><body><main>";

  // Header and summary.
  const std::string state(store::to_string(c.state));
  const std::string badge =
      state == "done" || state == "failed" || state == "running" ? state : "other";
  o << "<header><h1>" << esc(title) << "<span class=\"badge " << badge << "\">" << esc(state)
    << "</span></h1><div class=\"sub\">" << esc(d.op ? d.op->op_type : std::string())
    << (d.op && !d.op->op_type.empty() ? " · " : "") << esc(c.provider)
    << (c.model.empty() ? "" : " / " + esc(c.model)) << " · " << d.workloads.size()
    << " workloads · created " << esc(store::format_time(c.created_at))
    << (c.stop_reason ? " · " + esc(*c.stop_reason) : "") << "</div></header>";
  const candidate_view* best = c.best_candidate_id ? d.view(*c.best_candidate_id) : nullptr;
  const candidate_view* start = nullptr;
  for (auto id : d.best_path) {
    start = d.view(id);
    break;
  }
  std::size_t loop_candidates = 0;
  for (const auto& [id, v] : d.views) loop_candidates += v.result != outcome::start;
  double wall = c.spent_wall_time_s;
  if (d.started_ms && d.ended_ms)
    wall = std::max(wall, static_cast<double>(*d.ended_ms - *d.started_ms) / 1000.0);
  o << "<div class=\"cards\">";
  o << card("best", best && best->score ? pct(best->score) : pct(c.best_score),
            best ? "of speed of light" +
                       (best->attainable_score ? " (" + pct(best->attainable_score) + " attainable)"
                                               : std::string()) +
                       " · candidate " + std::to_string(best->rec->id)
                 : "no correct candidate yet");
  if (d.finished.is_object() && d.finished.contains("speedup_vs_baseline"))
    o << card("vs baseline", f(d.finished["speedup_vs_baseline"].get<double>(), 2) + "×",
              "head to head, fresh seeds");
  if (start && start->score && best && best->score)
    o << card("from start", f(*best->score / *start->score, 2) + "×",
              "sol gain over " + std::string(store::to_string(start->rec->origin)));
  o << card("iterations", std::to_string(c.spent_iterations),
            std::to_string(loop_candidates) + " candidates");
  o << card("tokens", human_int(c.spent_tokens),
            c.budget.tokens ? "of " + human_int(*c.budget.tokens) : "");
  o << card("cost", "$" + f(c.spent_cost_usd, 2),
            c.budget.cost_usd ? "of $" + f(*c.budget.cost_usd, 2) : "");
  o << card("wall time", duration(wall),
            d.finished.is_object() && d.finished.value("verified", false) ? "winner verified" : "");
  o << "</div>";

  o << "<section><h2>Progress</h2><p class=\"lead\">Weighted fraction of speed of light of the "
       "best candidate so far "
       "(line), the best of each iteration and every candidate that completed the full "
       "sweep.</p><div class=\"row\"><div><h3>by "
       "iteration</h3>"
    << progress_chart(d, false) << "</div><div><h3>by wall time</h3>" << progress_chart(d, true)
    << "</div></div></section>";

  std::string wl_table;
  const std::string wl_chart = workload_chart(d, wl_table);
  o << "<section><h2>Per workload</h2><p class=\"lead\">Fraction of speed of light on each "
       "workload: the best candidate "
       "against the seed, the baseline and the reference (where they were measured). The table "
       "gives median times.</p>"
    << wl_chart << "<div class=\"scroll\">" << wl_table << "</div></section>";

  o << "<section><h2>Outcomes per iteration</h2><p class=\"lead\">What became of each iteration's "
       "candidates: compile errors, "
       "wrong results, integrity rejections, and correct ones slower or faster than their "
       "parent.</p>"
    << outcome_chart(d) << "</section>";

  o << "<section><h2>Technique attribution</h2><p class=\"lead\">Optimization dropout keeps or "
       "drops each optional prompt item at random, per iteration and again per LLM call. Bars: "
       "mean gain of the calls that showed the item minus that of those that did not, in "
       "percentage points; a call gets its iteration's gain when the promoted candidate is its "
       "answer, else 0 (an iteration without recorded calls counts once). Few iterations make "
       "this noisy.</p>"
    << attribution_chart(d) << "</section>";
  // Results per model and per strategy hint (report/models.hpp).
  o << models_html_section(d);

  o << "<section><h2>Spend</h2><p class=\"lead\">Cumulative LLM tokens and cost over wall "
       "time.</p><div class=\"row\"><div><h3>tokens</h3>"
    << spend_chart(d, false) << "</div><div><h3>cost</h3>" << spend_chart(d, true)
    << "</div></div></section>";

  o << "<section><h2>Lineage</h2><p class=\"lead\">Every candidate by iteration, linked to its "
       "parent; the path from the start "
       "to the best is highlighted. Hover a node for details.</p><div class=\"scroll\">"
    << lineage_chart(d) << "</div>";
  {
    std::vector<std::pair<std::string, std::string>> items;
    items.emplace_back("#fde68a", "path to the best");
    for (auto oc : {outcome::start, outcome::faster, outcome::slower, outcome::compile_error,
                    outcome::incorrect, outcome::integrity, outcome::not_run})
      items.emplace_back(outcome_colors(oc).node, outcome_colors(oc).label);
    o << legend(items, "dot");
  }
  if (!d.best_path.empty()) {
    o << "<p class=\"note\">Path: ";
    bool first = true;
    for (auto id : d.best_path) {
      const auto* v = d.view(id);
      o << (first ? "" : " → ") << "<code>" << id << "</code>"
        << (v && v->score ? " (" + pct(v->score) + ")" : "");
      first = false;
    }
    o << "</p>";
  }
  o << "</section>";

  // The winner.
  o << "<section><h2>Winning kernel</h2>";
  if (best) {
    const auto& r = *best->rec;
    json params = json::object();
    for (const auto& k : d.compilations.at(r.id))
      if (k.status == "ok") params = k.parameter_values;
    o << "<dl class=\"meta\"><dt>candidate</dt><dd>" << r.id << " (" << store::to_string(r.origin)
      << ", iteration " << (best->iteration ? std::to_string(*best->iteration) : "-")
      << ")</dd><dt>score</dt><dd>" << pct(best->score) << " of speed of light (weighted)"
      << (best->attainable_score
              ? ", " + pct(best->attainable_score) + " attainable (max(SOL, launch floor) / T)"
              : std::string())
      << "</dd><dt>parameters</dt><dd><code>" << esc(params.dump())
      << "</code></dd><dt>source sha256</dt><dd><code>" << esc(r.source_hash) << "</code></dd>";
    if (r.note) o << "<dt>note</dt><dd>" << esc(*r.note) << "</dd>";
    if (r.llm_call_id)
      o << "<dt>prompt</dt><dd><a href=\"#call-" << *r.llm_call_id << "\">LLM call "
        << *r.llm_call_id << "</a></dd>";
    o << "</dl><pre class=\"code\">";
    std::istringstream is(r.source);
    std::string line;
    int n = 0;
    while (std::getline(is, line))
      o << "<span class=\"ln\">" << ++n << "</span>" << esc(line) << "\n";
    o << "</pre><details><summary>Launch plan</summary><pre class=\"code\">";
    n = 0;
    std::istringstream ps(r.launch_plan.dump(2));
    while (std::getline(ps, line))
      o << "<span class=\"ln\">" << ++n << "</span>" << esc(line) << "\n";
    o << "</pre></details>";
  } else {
    o << "<p class=\"lead\">No candidate is correct on every workload yet.</p>";
  }
  o << "</section>";

  // Iteration table.
  o << "<section><h2>Iterations</h2><div class=\"scroll\"><table "
       "class=\"data\"><thead><tr><th>#</th><th>strategy</th>"
       "<th class=\"r\">parent</th><th class=\"r\">cands</th><th>outcomes</th><th "
       "class=\"r\">best</th><th class=\"r\">best so "
       "far</th><th class=\"r\">kept/dropped</th><th class=\"r\">tokens</th><th "
       "class=\"r\">cost</th><th>events</th></tr></thead><tbody>";
  for (const auto& iv : d.iterations) {
    const auto& it = iv.sum->iteration;
    std::string outs;
    for (auto oc : loop_outcomes()) {
      auto x = iv.outcomes.find(oc);
      if (x == iv.outcomes.end() || !x->second) continue;
      outs +=
          "<i class=\"box\" "
          "style=\"display:inline-block;width:9px;height:9px;border-radius:2px;margin:0 3px 0 "
          "8px;background:" +
          std::string(outcome_colors(oc).fill) + "\"></i>" + std::to_string(x->second);
    }
    std::string events = iv.promoted ? "promoted (+" + f(iv.gain * 100, 1) + " %)" : "";
    for (const auto& e : iv.escalations)
      events += (events.empty() ? "" : ", ") + std::string("escalation: ") + e;
    o << "<tr><td>" << iv.number << "</td><td>" << esc(it.strategy) << "</td><td class=\"r\">"
      << (it.parent_candidate_id ? std::to_string(*it.parent_candidate_id) : "-")
      << "</td><td class=\"r\">" << iv.candidates.size() << "</td><td>" << outs
      << "</td><td class=\"r\">" << pct(iv.best_score) << "</td><td class=\"r\">"
      << pct(iv.incumbent_score) << "</td><td class=\"r\">" << iv.dropout_kept << "/"
      << iv.dropout_dropped << "</td><td class=\"r\">" << human_int(iv.tokens)
      << "</td><td class=\"r\">$" << f(iv.cost_usd, 3) << "</td><td>" << esc(events)
      << "</td></tr>";
  }
  o << "</tbody></table></div></section>";

  // Every LLM call with its prompt and answer, and the candidates each
  // produced: a researcher follows a kernel back to what it was asked.
  if (!d.llm_calls.empty()) {
    std::map<store::row_id, std::int64_t> number_of;
    for (const auto& iv : d.iterations) number_of[iv.sum->iteration.id] = iv.number;
    std::map<store::row_id, std::vector<store::row_id>> produced;
    for (const auto& c : d.candidates)
      if (c.llm_call_id) produced[*c.llm_call_id].push_back(c.id);
    // Long campaigns make many calls: each text is cut for the page (the
    // store and `kopt show candidate` keep them whole).
    constexpr std::size_t max_text = 32 * 1024;
    auto text = [&](const std::string& t) {
      return t.size() <= max_text
                 ? esc(t)
                 : esc(t.substr(0, max_text)) + "\n… (cut; `kopt show candidate` prints it whole)";
    };
    o << "<section><h2>Prompts</h2><p class=\"lead\">Every LLM call of the campaign: what was "
         "asked, "
         "what came back, and the candidates its answer became.</p>";
    for (const auto& call : d.llm_calls) {
      std::string made;
      for (auto id : produced[call.id]) made += (made.empty() ? "" : ", ") + std::to_string(id);
      const auto n = call.iteration_id ? number_of.find(*call.iteration_id) : number_of.end();
      o << "<details id=\"call-" << call.id << "\"><summary>call " << call.id << " · iteration "
        << (n != number_of.end() ? std::to_string(n->second) : std::string("-")) << " · "
        << esc(call.model) << " · " << esc(call.status) << " · "
        << human_int(call.prompt_tokens + call.completion_tokens) << " tokens · candidates "
        << (made.empty() ? std::string("none") : made) << "</summary><pre class=\"code\">"
        << text(call.prompt) << "</pre><pre class=\"code\">"
        << text(call.response.value_or("(no answer)")) << "</pre></details>";
    }
    o << "</section>";
  }

  // Notable events.
  o << "<section><h2>Events</h2><div class=\"scroll\"><table class=\"data\"><thead><tr><th>time "
       "(UTC)</th><th>level</th><th>kind</th>"
       "<th>message</th></tr></thead><tbody>";
  for (const auto& e : d.events) {
    if (e.level == "debug") continue;
    o << "<tr><td>" << esc(store::format_time(e.created_at)) << "</td><td>" << esc(e.level)
      << "</td><td>" << esc(e.kind) << "</td><td style=\"white-space:normal\">" << esc(e.message)
      << "</td></tr>";
  }
  o << "</tbody></table></div></section>";

  o << "<footer>Generated by " << esc(opts.generated_by.empty() ? "kopt" : opts.generated_by)
    << " from " << esc(opts.database.empty() ? std::string("the kopt store") : opts.database)
    << " at " << esc(store::format_time(store::now_ms()))
    << ". Self-contained: no script, no network. Fraction of speed of light = roofline time / "
       "median time.</footer>";
  o << "</main></body></html>\n";
  return o.str();
}

}  // namespace kopt::report
