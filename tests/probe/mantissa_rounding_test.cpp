// A recording with rounded layer values (ProbeOptions::record_mantissa_bits): every value
// within half a unit of the last kept bit, non-finite values and counts of them exact, and the
// flight recorder writing step records rounded while descriptions and events pass unchanged.
#include "record/mantissa_rounding.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"
#include "record/flight_recorder.hpp"

namespace keel::probe {
namespace {

TEST(MantissaRounding, EveryValueIsWithinHalfTheLastKeptBitAndStaysInItsSign) {
  uint32_t x = 1;
  for (int i = 0; i < 200000; ++i) {
    x = x * 1664525u + 1013904223u;
    float value;
    std::memcpy(&value, &x, sizeof value);
    if (!std::isfinite(value)) continue;
    for (int bits : {1, 7, 8, 10, 16, 22}) {
      const float rounded = round_mantissa(value, bits);
      if (std::isinf(rounded)) {
        // Only a value within the rounding of the largest float.
        EXPECT_GT(std::fabs(value), 1.7e38f) << value << " " << bits;
        continue;
      }
      ASSERT_EQ(std::signbit(rounded), std::signbit(value));
      const double error = std::fabs(static_cast<double>(rounded) - value);
      // Half a unit in the last kept place, of the value's binade (denormals: absolute).
      const double ulp = std::ldexp(1.0, std::ilogb(value == 0 ? 1.0f : value) - bits);
      ASSERT_LE(error, std::max(ulp / 2, std::ldexp(1.0, -149 + 23 - bits))) << value << " " << bits;
    }
  }
  EXPECT_EQ(round_mantissa(1.0f + std::ldexp(1.0f, -9), 8), 1.0f + std::ldexp(1.0f, -8));   // half rounds up
  EXPECT_EQ(round_mantissa(1.99999f, 8), 2.0f);   // into the next binade
  EXPECT_EQ(round_mantissa(0.1f, 23), 0.1f);
}

TEST(MantissaRounding, NonFiniteValuesAndTheCountsOfThemAreExact) {
  wire::StepRecord record;
  record.layer_count = 2;
  record.layer_values = {1.2345678f, std::numeric_limits<float>::quiet_NaN(),   // grad_norm
                         std::numeric_limits<float>::infinity(), 3.3333333f,    // grad_absmax
                         4097.0f, 16777215.0f,                                  // grad_nonfinite
                         0.123456f, 0.5f,                                       // grad_zero_frac
                         -std::numeric_limits<float>::infinity(), 7.654321f,    // param_norm
                         1e-3f, 2e-7f};                                         // update_ratio
  const std::vector<float> before = record.layer_values;
  ASSERT_TRUE(round_layer_values(record, 8));
  EXPECT_TRUE(std::isnan(record.layer_values[1]));
  EXPECT_EQ(record.layer_values[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(record.layer_values[4], 4097.0f);
  EXPECT_EQ(record.layer_values[5], 16777215.0f);
  EXPECT_EQ(record.layer_values[8], -std::numeric_limits<float>::infinity());
  EXPECT_NE(record.layer_values[0], before[0]);
  EXPECT_EQ(record.layer_values[0], round_mantissa(before[0], 8));
  EXPECT_FALSE(round_layer_values(record, 23));
}

TEST(MantissaRounding, TheRecorderWritesStepRecordsRoundedAndEverythingElseAsItCame) {
  const std::string path = ::testing::TempDir() + "keel-rounded-" + std::to_string(::getpid()) + ".keelrec";
  std::remove(path.c_str());
  FlightRecorderOptions options;
  options.path = path;
  options.mantissa_bits = 8;
  std::string error;
  wire::StepRecord record;
  record.run = "r";
  record.step = 3;
  record.loss = 1.0 / 3.0;
  record.layer_count = 1;
  record.layer_values = {0.1f, 0.2f, 5.0f, 0.3f, 0.4f, 0.5f};
  wire::Event event;
  event.run = "r";
  event.step = 3;
  event.kind = "spike";
  event.detail = "exact text";
  {
    std::unique_ptr<FlightRecorder> recorder = FlightRecorder::start(options, error);
    ASSERT_TRUE(recorder) << error;
    recorder->record(record, std::make_shared<const std::vector<char>>(wire::encode(record)));
    recorder->record(event, std::make_shared<const std::vector<char>>(wire::encode(event)));
  }
  auto reader = wire::RecordingReader::open(path, error);
  ASSERT_TRUE(reader) << error;
  std::vector<wire::Message> read;
  reader->read_all([&](const wire::RecordingFrame& f) {
    wire::DecodeResult d = wire::decode(f.data, f.size);
    ASSERT_TRUE(d.ok) << d.error;
    read.push_back(d.message);
  });
  std::remove(path.c_str());
  ASSERT_EQ(read.size(), 2u);
  const auto& stored = std::get<wire::StepRecord>(read[0]);
  EXPECT_EQ(stored.loss, 1.0 / 3.0);
  ASSERT_EQ(stored.layer_values.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(stored.layer_values[i], i == 2 ? 5.0f : round_mantissa(record.layer_values[i], 8)) << i;
  }
  EXPECT_NE(stored.layer_values[0], 0.1f);
  EXPECT_EQ(std::get<wire::Event>(read[1]).detail, "exact text");
}

}  // namespace
}  // namespace keel::probe
