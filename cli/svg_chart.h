// SvgChart: one line chart panel as SVG, drawn by the tool itself for the
// HTML report (no scripts, no fonts or files from elsewhere). Logarithmic or
// linear x axis, linear y axis, labelled ticks with units, polylines,
// vertical markers and dots, a legend.
//
// Values outside the axis ranges are clipped to the plot area. All text is
// escaped. Thread-compatible.
#ifndef SPINTUNE_CLI_SVG_CHART_H_
#define SPINTUNE_CLI_SVG_CHART_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spintune {

// The reports' series colours (matplotlib's first five).
inline constexpr char kChartBlue[] = "#1f77b4";
inline constexpr char kChartOrange[] = "#ff7f0e";
inline constexpr char kChartGreen[] = "#2ca02c";
inline constexpr char kChartRed[] = "#d62728";
inline constexpr char kChartPurple[] = "#9467bd";

// &, <, >, " and ' as entities.
std::string EscapeHtml(const std::string& text);

class SvgChart {
 public:
  struct Series {
    std::string label;
    std::string color;
    std::vector<std::pair<double, double>> points;  // (x, y), x increasing
    bool dashed = false;
    bool step = false;  // horizontal then vertical segments (a CDF)
  };
  struct Marker {  // a vertical line across the plot
    double x = 0;
    std::string label;
    std::string color;
  };
  struct Dot {
    double x = 0, y = 0;
    std::string label;
    std::string color;
  };

  SvgChart(std::string title, std::string x_label, std::string y_label)
      : title_(std::move(title)), x_label_(std::move(x_label)), y_label_(std::move(y_label)) {}

  void SetLogX(double min_x, double max_x);  // REQUIRES: 0 < min_x < max_x
  void SetY(double min_y, double max_y);     // REQUIRES: min_y < max_y
  // How tick values print (default: "%g").
  void SetXFormat(std::function<std::string(double)> f) { x_format_ = std::move(f); }
  void SetYFormat(std::function<std::string(double)> f) { y_format_ = std::move(f); }
  void Add(Series s) { series_.push_back(std::move(s)); }
  void Add(Marker m) { markers_.push_back(std::move(m)); }
  void Add(Dot d) { dots_.push_back(std::move(d)); }
  // A note under the title (e.g. "not fitted: too few samples").
  void SetNote(std::string note) { note_ = std::move(note); }

  // The panel as an SVG <g> of `width` x `height` at (x0, y0).
  std::string RenderPanel(double x0, double y0, double width, double height) const;

 private:
  double MapX(double x, double left, double plot_w) const;
  double MapY(double y, double top, double plot_h) const;

  std::string title_, x_label_, y_label_, note_;
  double min_x_ = 1, max_x_ = 10, min_y_ = 0, max_y_ = 1;
  std::function<std::string(double)> x_format_, y_format_;
  std::vector<Series> series_;
  std::vector<Marker> markers_;
  std::vector<Dot> dots_;
};

}  // namespace spintune

#endif  // SPINTUNE_CLI_SVG_CHART_H_
