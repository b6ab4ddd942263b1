// The HTML report rendered by a real browser: headless Chromium (Debian's
// `chromium` package, installed by `scripts/test`) loads the file with the
// network disabled, dumps the DOM it built and takes a screenshot. The test
// checks that Chromium parsed every chart as SVG with its marks, and that
// each chart's own colour (a fill used by no other chart) covers enough
// pixels of the screenshot to be a drawn chart, not an empty frame.
//
// Chromium missing is a failure: the test is only skipped (exit 77, CTest
// "Skipped") when KOPT_CHROMIUM_ABSENT=1 says it is absent on purpose.
// KOPT_CHROMIUM=PATH picks the browser binary; KOPT_REPORT_SCREENSHOT=PATH
// keeps a copy of the screenshot to look at.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "report/data.hpp"
#include "report/html.hpp"
#include "support.hpp"

namespace kopt::report {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string find_chromium() {
  if (const char* c = std::getenv("KOPT_CHROMIUM")) return c;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (fs::exists(p)) return p;
  return "";
}

int run(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A decoded 8-bit RGB(A) PNG, as Chromium writes screenshots.
struct image {
  std::uint32_t w = 0, h = 0;
  std::vector<std::uint8_t> rgb;  // 3 bytes per pixel
};

std::uint32_t be32(const std::string& s, std::size_t p) {
  return (static_cast<std::uint32_t>(static_cast<std::uint8_t>(s[p])) << 24) |
         (static_cast<std::uint32_t>(static_cast<std::uint8_t>(s[p + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<std::uint8_t>(s[p + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(s[p + 3]));
}

image decode_png(const std::string& png) {
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0)
    throw std::runtime_error("not a PNG");
  image im;
  int bit_depth = 0, color = 0, interlace = 0;
  std::string idat;
  for (std::size_t p = 8; p + 8 <= png.size();) {
    const std::uint32_t len = be32(png, p);
    const std::string type = png.substr(p + 4, 4);
    if (p + 12 + len > png.size()) throw std::runtime_error("truncated PNG");
    if (type == "IHDR") {
      im.w = be32(png, p + 8);
      im.h = be32(png, p + 12);
      bit_depth = static_cast<std::uint8_t>(png[p + 16]);
      color = static_cast<std::uint8_t>(png[p + 17]);
      interlace = static_cast<std::uint8_t>(png[p + 20]);
    } else if (type == "IDAT") {
      idat.append(png, p + 8, len);
    } else if (type == "IEND") {
      break;
    }
    p += 12 + len;
  }
  if (bit_depth != 8 || (color != 2 && color != 6) || interlace != 0)
    throw std::runtime_error("unsupported PNG layout (depth " + std::to_string(bit_depth) +
                             ", colour " + std::to_string(color) + ")");
  const std::size_t bpp = color == 6 ? 4 : 3, stride = im.w * bpp;
  std::vector<std::uint8_t> raw((stride + 1) * im.h);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size())
    throw std::runtime_error("PNG data does not inflate");
  std::vector<std::uint8_t> prev(stride, 0), cur(stride);
  im.rgb.resize(static_cast<std::size_t>(im.w) * im.h * 3);
  for (std::uint32_t y = 0; y < im.h; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? cur[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      int v = in[x];
      switch (filter) {
        case 0:
          break;
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) / 2;
          break;
        case 4: {
          const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
          v += (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default:
          throw std::runtime_error("bad PNG filter");
      }
      cur[x] = static_cast<std::uint8_t>(v);
    }
    for (std::uint32_t x = 0; x < im.w; ++x)
      for (std::size_t k = 0; k < 3; ++k)
        im.rgb[(static_cast<std::size_t>(y) * im.w + x) * 3 + k] = cur[x * bpp + k];
    std::swap(prev, cur);
  }
  return im;
}

std::size_t count_color(const image& im, std::uint32_t hex) {
  const int r = static_cast<int>(hex >> 16), g = static_cast<int>((hex >> 8) & 0xff),
            b = static_cast<int>(hex & 0xff);
  std::size_t n = 0;
  for (std::size_t i = 0; i + 2 < im.rgb.size(); i += 3)
    n += std::abs(im.rgb[i] - r) <= 2 && std::abs(im.rgb[i + 1] - g) <= 2 &&
         std::abs(im.rgb[i + 2] - b) <= 2;
  return n;
}

TEST(Chromium, RendersEveryChartOfTheReport) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    const char* absent = std::getenv("KOPT_CHROMIUM_ABSENT");
    if (absent && std::string(absent) == "1") {
      std::cerr << "chromium not installed and KOPT_CHROMIUM_ABSENT=1: skipping\n";
      std::exit(77);
    }
    FAIL() << "chromium is not installed (Debian package `chromium`; scripts/test installs it). "
              "Set KOPT_CHROMIUM_ABSENT=1 to skip on purpose.";
  }
  test::research_store rs;
  auto db = store::store::open(rs.db_path(), {.read_only = true});
  const auto d = load_campaign(db, rs.f.campaign_id);
  test::temp_dir dir;
  const fs::path html = dir / "report.html", dom = dir / "dom.html", shot = dir / "shot.png";
  std::ofstream(html) << html_report(d, {});
  // A fresh profile, no network, no GPU; --no-sandbox because CI runs as root.
  const std::string common =
      "'" + chromium +
      "' --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
      "--user-data-dir='" +
      (dir / "profile").string() +
      "' --proxy-server=127.0.0.1:9 "
      "--hide-scrollbars --force-device-scale-factor=1 ";
  ASSERT_EQ(run(common + "--dump-dom 'file://" + html.string() + "' > '" + dom.string() + "' 2>'" +
                (dir / "err1.txt").string() + "'"),
            0)
      << slurp(dir / "err1.txt");
  const std::string parsed = slurp(dom);
  for (const char* chart : {"progress-iteration", "progress-time", "workloads", "outcomes",
                            "attribution", "tokens", "cost", "lineage"}) {
    const std::regex re(std::string("<svg[^>]*data-chart=\"") + chart + "\" data-marks=\"(\\d+)\"");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(parsed, m, re)) << chart << " not in the DOM Chromium built";
    EXPECT_GT(std::stoi(m[1]), 0) << chart;
  }
  EXPECT_GT(std::count(parsed.begin(), parsed.end(), '<'), 500);

  ASSERT_EQ(run(common + "--window-size=1280,7000 --screenshot='" + shot.string() + "' 'file://" +
                html.string() + "' >'" + (dir / "out2.txt").string() + "' 2>&1"),
            0)
      << slurp(dir / "out2.txt");
  ASSERT_TRUE(fs::exists(shot)) << slurp(dir / "out2.txt");
  if (const char* keep = std::getenv("KOPT_REPORT_SCREENSHOT"))
    fs::copy_file(shot, keep, fs::copy_options::overwrite_existing);
  const image im = decode_png(slurp(shot));
  EXPECT_EQ(im.w, 1280u);
  // Each chart's own colour, and the least area it should cover when drawn.
  // (Legend swatches use some of these colours too: at most ~150 pixels each.)
  struct signature {
    const char* what;
    std::uint32_t color;
    std::size_t min_pixels;
  };
  const signature signatures[] = {
      {"progress by iteration (area under the best)", 0xdbeafe, 3000},
      {"progress by wall time (area under the best)", 0xe0e7ff, 3000},
      {"per-workload bars (best)", 0x0f766e, 1000},
      {"outcomes (faster)", 0x16a34a, 1000},
      {"attribution (row bands)", 0xecfeff, 3000},
      {"tokens (area)", 0xffedd5, 3000},
      {"cost (area)", 0xfce7f3, 3000},
      {"lineage (nodes on the path to the best)", 0xfde68a, 400},
  };
  for (const auto& sg : signatures) EXPECT_GT(count_color(im, sg.color), sg.min_pixels) << sg.what;
  // And it is not all background: plenty of pixels differ from white and the page grey.
  std::size_t ink = 0;
  for (std::size_t i = 0; i + 2 < im.rgb.size(); i += 3)
    ink += im.rgb[i] < 200 || im.rgb[i + 1] < 200 || im.rgb[i + 2] < 200;
  EXPECT_GT(ink, 20000u);
}

}  // namespace
}  // namespace kopt::report
