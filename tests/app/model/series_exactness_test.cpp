// SeriesHistory answers: every pixel column is exact over the steps it reports, no sample in
// range is missed, coarse columns never share a sample, and NaN/Inf survive every level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "model/series_history.hpp"
#include "reference_series.hpp"

namespace keel::app {
namespace {

using test_support::ReferenceSeries;
using test_support::same_summary;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

ModelConfig small_config(int64_t recent_steps, int64_t archive_buckets) {
  ModelConfig config;
  config.recent_steps = recent_steps;
  config.archive_buckets = archive_buckets;
  return config;
}

Summary merge(const std::vector<Column>& columns) {
  SummaryBuilder builder;
  for (const Column& column : columns) {
    if (column.value.has_finite()) builder.add_bucket(column.value.min, column.value.max, 0);
    builder.flags |= column.value.flags;
  }
  return builder.finish();
}

// Checks one query's columns against brute force and the coarse/fine mode guarantees.
void check_query(const SeriesHistory& series, const ReferenceSeries& reference, int64_t first,
                 int64_t last, int pixel_columns) {
  const ColumnGrid grid(first, last, pixel_columns);
  std::vector<Column> columns;
  series.columns(grid, columns);
  ASSERT_EQ(columns.size(), static_cast<size_t>(grid.columns()));
  const bool coarse = grid.min_column_steps() >= series.bucket_steps();
  int64_t previous_last = std::numeric_limits<int64_t>::min();
  for (int c = 0; c < grid.columns(); ++c) {
    const Column& column = columns[static_cast<size_t>(c)];
    SCOPED_TRACE(testing::Message() << "range [" << first << ", " << last << "] columns "
                                    << pixel_columns << " column " << c);
    // Exact over exactly the steps it says it covers.
    const Summary brute = reference.summarize(column.first_step, column.last_step);
    ASSERT_TRUE(same_summary(column.value, brute))
        << "covered [" << column.first_step << ", " << column.last_step << "] got min "
        << column.value.min << " max " << column.value.max << " flags " << int{column.value.flags}
        << ", brute force min " << brute.min << " max " << brute.max << " flags "
        << int{brute.flags};
    if (!column.value.has_data()) continue;
    if (coarse) {
      // Whole buckets, each in one column: covered ranges never overlap, and reach past the
      // nominal edges by less than one column width.
      EXPECT_GT(column.first_step, previous_last);
      EXPECT_GE(column.first_step, c == 0 ? first - grid.min_column_steps() + 1 : grid.start(c));
      EXPECT_LE(column.last_step, grid.start(c + 1) - 1 + grid.min_column_steps() - 1);
      previous_last = column.last_step;
    } else if (grid.start(c) >= series.recent_first_step()) {
      // Full resolution: exactly the column's own steps.
      EXPECT_EQ(column.first_step, grid.start(c));
      EXPECT_EQ(column.last_step, grid.start(c + 1) - 1);
    }
  }
  // Never misses a sample of the range: the columns together hold its extremes and flags.
  const Summary expected = reference.summarize(first, last);
  const Summary got = merge(columns);
  if (expected.has_finite()) {
    ASSERT_TRUE(got.has_finite());
    EXPECT_LE(got.min, expected.min);
    EXPECT_GE(got.max, expected.max);
  }
  EXPECT_EQ(got.flags & expected.flags, expected.flags);
}

TEST(SeriesHistoryExactness, RandomRangesMatchBruteForceOnLongSeries) {
  // A small window and budget so 200k steps coarsen the archive many times over.
  const ModelConfig config = small_config(1024, 256);
  const int64_t origin = 5000;
  SeriesHistory series(origin, config);
  ReferenceSeries reference(origin);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);

  int64_t step = origin;
  const int64_t end = origin + 200000;
  const std::vector<int64_t> checkpoints = {origin + 100, origin + 3000, origin + 60000, end};
  size_t next_checkpoint = 0;
  while (step < end) {
    const float value = test_support::random_sample(rng, step);
    ASSERT_TRUE(series.append(step, value));
    reference.set(step, value);
    // Gaps: mostly single missing steps, sometimes a long outage.
    const double roll = unit(rng);
    step += roll < 0.05 ? 2 : (roll < 0.0502 ? 3000 : 1);
    if (step >= checkpoints[next_checkpoint]) {
      for (int q = 0; q < 60; ++q) {
        const int64_t span = series.last_step() - origin + 200;
        int64_t a = origin - 100 + static_cast<int64_t>(unit(rng) * span);
        int64_t b = origin - 100 + static_cast<int64_t>(unit(rng) * span);
        if (q % 4 == 0) b = series.last_step();  // the live edge, where the UI usually looks
        if (a > b) std::swap(a, b);
        const int columns = 1 + static_cast<int>(unit(rng) * (q % 3 == 0 ? 40 : 3000));
        check_query(series, reference, a, b, columns);
        if (HasFatalFailure()) return;
      }
      ++next_checkpoint;
    }
  }
  EXPECT_GT(series.bucket_steps(), 256) << "the test must exercise coarsening";
}

TEST(SeriesHistoryExactness, NonFiniteSurvivesEveryLevelAndNeverPoisonsMinMax) {
  // Budget 64: levels of 64, 16 and 4 buckets, all of them coarsened many times by 100k steps.
  const ModelConfig config = small_config(16, 64);
  SeriesHistory series(0, config);
  ReferenceSeries reference(0);
  const int64_t nan_step = 12345;
  const int64_t posinf_step = 54321;
  const int64_t neginf_step = 99990;  // inside the last, partial buckets
  for (int64_t step = 0; step < 100000; ++step) {
    float value = 1.0f + static_cast<float>(step % 7);
    if (step == nan_step) value = kNan;
    if (step == posinf_step) value = kInf;
    if (step == neginf_step) value = -kInf;
    ASSERT_TRUE(series.append(step, value));
    reference.set(step, value);
  }
  ASSERT_GE(series.bucket_steps(), 100000 / 64);

  // One column: every flag, and min/max of the finite values only.
  const Column all = series.columns(0, 99999, 1).front();
  EXPECT_TRUE(all.value.has_nan());
  EXPECT_TRUE(all.value.has_posinf());
  EXPECT_TRUE(all.value.has_neginf());
  EXPECT_EQ(all.value.min, 1.0f);
  EXPECT_EQ(all.value.max, 7.0f);

  // Every column count from 1 to 4096 picks a different level or mode somewhere; in each, the
  // columns flagged are exactly those whose covered steps hold the value.
  for (int columns = 1; columns <= 4096; columns = columns * 3 / 2 + 1) {
    const ColumnGrid grid(0, 99999, columns);
    std::vector<Column> out;
    series.columns(grid, out);
    int nan_columns = 0;
    for (const Column& column : out) {
      const bool holds_nan = column.first_step <= nan_step && nan_step <= column.last_step;
      const bool holds_posinf = column.first_step <= posinf_step && posinf_step <= column.last_step;
      const bool holds_neginf = column.first_step <= neginf_step && neginf_step <= column.last_step;
      EXPECT_EQ(column.value.has_nan(), holds_nan) << columns << " columns";
      EXPECT_EQ(column.value.has_posinf(), holds_posinf) << columns << " columns";
      EXPECT_EQ(column.value.has_neginf(), holds_neginf) << columns << " columns";
      EXPECT_TRUE(column.value.has_finite());
      nan_columns += holds_nan ? 1 : 0;
    }
    EXPECT_GE(nan_columns, 1) << columns << " columns: the NaN must show somewhere";
  }
}

TEST(SeriesHistoryExactness, ColumnOfOnlyNanHasDataButNoFiniteExtremes) {
  SeriesHistory series(0, small_config(16, 8));
  ASSERT_TRUE(series.append(0, 3.0f));
  ASSERT_TRUE(series.append(1, kNan));
  ASSERT_TRUE(series.append(2, 5.0f));
  const std::vector<Column> columns = series.columns(0, 2, 3);
  EXPECT_EQ(columns[1].value.flags, kHasData | kHasNan);
  EXPECT_FALSE(columns[1].value.has_finite());
  EXPECT_TRUE(std::isnan(columns[1].value.min));
  EXPECT_EQ(columns[0].value.min, 3.0f);
  EXPECT_EQ(columns[2].value.max, 5.0f);
}

TEST(SeriesHistoryExactness, MissingStepsHaveNoDataAndOtherNansAreNotTheMarker) {
  SeriesHistory series(0, small_config(64, 64));
  ASSERT_TRUE(series.append(0, 1.0f));
  ASSERT_TRUE(series.append(10, 2.0f));
  float value = 0;
  EXPECT_FALSE(series.value_at(5, &value));
  ASSERT_TRUE(series.value_at(10, &value));
  EXPECT_EQ(value, 2.0f);
  const std::vector<Column> columns = series.columns(0, 10, 11);
  for (int c = 1; c < 10; ++c) EXPECT_FALSE(columns[static_cast<size_t>(c)].value.has_data()) << c;

  // A NaN with any payload, even the bits the store uses for "missing", is stored as a NaN.
  float marker_bits_nan;
  const uint32_t bits = 0x7fc0deadu;
  std::memcpy(&marker_bits_nan, &bits, sizeof marker_bits_nan);
  ASSERT_TRUE(series.append(11, marker_bits_nan));
  ASSERT_TRUE(series.value_at(11, &value));
  EXPECT_TRUE(std::isnan(value));
  EXPECT_TRUE(series.columns(11, 11, 1).front().value.has_nan());
}

TEST(SeriesHistoryExactness, DuplicateAndLateStepsAreRefused) {
  SeriesHistory series(100, small_config(64, 64));
  EXPECT_FALSE(series.append(99, 1.0f)) << "before the origin";
  ASSERT_TRUE(series.append(100, 1.0f));
  ASSERT_TRUE(series.append(105, 2.0f));
  EXPECT_FALSE(series.append(105, 9.0f));
  EXPECT_FALSE(series.append(103, 9.0f));
  EXPECT_EQ(series.last_step(), 105);
  EXPECT_EQ(series.last_value(), 2.0f);
  EXPECT_EQ(series.columns(100, 105, 1).front().value.max, 2.0f);
}

TEST(SeriesHistoryExactness, RecentWindowWrapsWithoutStaleSamples) {
  // After a gap longer than part of the window, slots from one lap ago must read as missing.
  // Budget 8 makes the archive coarser than one step, so these columns read the raw window.
  SeriesHistory series(0, small_config(16, 8));
  for (int64_t step = 0; step < 16; ++step) ASSERT_TRUE(series.append(step, 100.0f));
  ASSERT_TRUE(series.append(24, 1.0f));
  EXPECT_EQ(series.recent_first_step(), 9);
  float value = 0;
  for (int64_t step = 16; step < 24; ++step) EXPECT_FALSE(series.value_at(step, &value)) << step;
  ASSERT_TRUE(series.value_at(12, &value));
  EXPECT_EQ(value, 100.0f);
  EXPECT_FALSE(series.value_at(8, &value)) << "older than the window";
  // Fine-mode columns over the gap see nothing, not last lap's 100.
  const std::vector<Column> columns = series.columns(16, 24, 9);
  for (int c = 0; c < 8; ++c) EXPECT_FALSE(columns[static_cast<size_t>(c)].value.has_data()) << c;
  EXPECT_EQ(columns[8].value.max, 1.0f);
}

// Queries over the whole series, the newest steps and a few random ranges, at several widths.
void check_rewound(const SeriesHistory& series, const ReferenceSeries& reference, int64_t origin,
                   std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int q = 0; q < 24; ++q) {
    const int64_t span = series.last_step() - origin + 100;
    int64_t a = origin + static_cast<int64_t>(unit(rng) * span) - 50;
    int64_t b = q % 3 == 0 ? series.last_step() : origin + static_cast<int64_t>(unit(rng) * span);
    if (a > b) std::swap(a, b);
    // Within the stored steps: past the newest, a fine column rightly covers fewer steps.
    b = std::min(b, series.last_step());
    a = std::min(a, b);
    check_query(series, reference, a, b, 1 + static_cast<int>(unit(rng) * (q % 2 ? 30 : 1500)));
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(SeriesHistoryRewind, ContinuationAfterDropAfterMatchesBruteForce) {
  // A run rewound many times, each time by less than the window minus a bucket (the case
  // drop_after() keeps exact): every query must then match the samples of the kept steps and
  // of the continuation, never those forgotten.
  const ModelConfig config = small_config(1024, 64);
  const int64_t origin = 300;
  SeriesHistory series(origin, config);
  ReferenceSeries reference(origin);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> back(0, 900);
  int64_t step = origin;
  int rewinds = 0;
  for (int round = 0; round < 40; ++round) {
    const int64_t run_to = step + 200 + static_cast<int64_t>(rng() % 3000);
    for (; step < run_to; ++step) {
      const float value = test_support::random_sample(rng, step);
      ASSERT_TRUE(series.append(step, value)) << step;
      reference.set(step, value);
    }
    const int64_t newest = step - 1;
    const int64_t keep_to = newest - back(rng);
    if (keep_to - series.bucket_steps() < series.recent_first_step()) continue;
    series.drop_after(keep_to);
    reference.drop_after(keep_to);
    ++rewinds;
    EXPECT_EQ(series.last_step(), keep_to);
    EXPECT_FALSE(series.append(keep_to, 1.0f)) << "a kept step is still stored";
    step = keep_to + 1;
    check_rewound(series, reference, origin, rng);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(rewinds, 20);
  EXPECT_GT(series.bucket_steps(), 4) << "the test must exercise coarsened buckets";
}

TEST(SeriesHistoryRewind, ForgottenSamplesNeverShowInTheRecentWindow) {
  SeriesHistory series(0, small_config(64, 1024));
  for (int64_t step = 0; step < 200; ++step) ASSERT_TRUE(series.append(step, 1.0f));
  // Steps 150..199 are forgotten; 120..149 are continued with 2.0 from 150 on.
  series.drop_after(149);
  EXPECT_EQ(series.last_step(), 149);
  EXPECT_EQ(series.last_value(), 1.0f);
  float value = 0;
  EXPECT_FALSE(series.value_at(150, &value));
  for (int64_t step = 150; step < 170; ++step) ASSERT_TRUE(series.append(step, 2.0f));
  ASSERT_TRUE(series.value_at(160, &value));
  EXPECT_EQ(value, 2.0f);
  // The slots of 86..135 held 150..199 a lap ahead: they must not read as those samples.
  ASSERT_TRUE(series.value_at(140, &value));
  EXPECT_EQ(value, 1.0f);
  for (const Column& column : series.columns(100, 169, 70)) {
    if (!column.value.has_data()) continue;
    EXPECT_EQ(column.value.max, column.first_step < 150 ? 1.0f : 2.0f) << column.first_step;
  }
}

TEST(SeriesHistoryRewind, DropBeyondTheWindowLosesNoKeptExtremeAndStillAppends) {
  // Back further than the recent window: the bucket holding the kept step keeps the forgotten
  // steps' extremes too (documented), but no kept sample's extreme or NaN is lost.
  SeriesHistory series(0, small_config(16, 8));
  ReferenceSeries reference(0);
  for (int64_t step = 0; step < 500; ++step) {
    const float value = step == 37 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(step % 50);
    ASSERT_TRUE(series.append(step, value));
    reference.set(step, value);
  }
  series.drop_after(100);
  reference.drop_after(100);
  EXPECT_EQ(series.last_step(), 100);
  const Summary kept = merge(series.columns(0, 100, 5));
  EXPECT_LE(kept.min, 0.0f);
  EXPECT_GE(kept.max, 49.0f);
  EXPECT_TRUE(kept.has_nan());
  ASSERT_TRUE(series.append(101, 1000.0f));
  EXPECT_EQ(merge(series.columns(0, 101, 3)).max, 1000.0f);
  series.drop_after(-5);
  EXPECT_TRUE(series.empty());
  EXPECT_FALSE(merge(series.columns(0, 101, 3)).has_data());
  ASSERT_TRUE(series.append(0, 3.0f));
  EXPECT_EQ(merge(series.columns(0, 101, 3)).max, 3.0f);
}

}  // namespace
}  // namespace keel::app
