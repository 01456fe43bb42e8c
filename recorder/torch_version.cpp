// Finds the loaded PyTorch's version (see torch_version.h).
#include "recorder/torch_version.h"

#include <link.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace gpurr::recorder {

std::optional<std::string> torchVersionFromVersionPy(const std::string& text) {
  static const std::regex line(R"(^__version__\s*=\s*['"]([^'"]+)['"])", std::regex::multiline);
  std::smatch m;
  if (!std::regex_search(text, m, line)) return std::nullopt;
  return m[1].str();
}

std::optional<std::string> loadedTorchVersion() {
  std::string c10;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.ends_with("/libc10.so")) {
          *static_cast<std::string*>(data) = name;
          return 1;
        }
        return 0;
      },
      &c10);
  if (c10.empty()) return std::nullopt;
  // torch/lib/libc10.so -> torch/version.py
  const std::filesystem::path versionPy = std::filesystem::path(c10).parent_path().parent_path() / "version.py";
  std::ifstream in(versionPy);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return torchVersionFromVersionPy(text.str());
}

}  // namespace gpurr::recorder
