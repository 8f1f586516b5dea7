// flintkv/version.h, generated from project(VERSION), says the version the
// build was configured with (passed here as compile definitions by
// tests/CMakeLists.txt).
#include "flintkv/version.h"

#include <gtest/gtest.h>

#include <string>

TEST(VersionTest, HeaderMatchesProjectVersion) {
  EXPECT_EQ(FLINTKV_VERSION_MAJOR, FLINTKV_EXPECTED_MAJOR);
  EXPECT_EQ(FLINTKV_VERSION_MINOR, FLINTKV_EXPECTED_MINOR);
  EXPECT_EQ(FLINTKV_VERSION_PATCH, FLINTKV_EXPECTED_PATCH);
  EXPECT_EQ(std::string(FLINTKV_VERSION_STRING), FLINTKV_EXPECTED_STRING);
  EXPECT_EQ(FLINTKV_VERSION, FLINTKV_EXPECTED_MAJOR * 10000 +
                                 FLINTKV_EXPECTED_MINOR * 100 +
                                 FLINTKV_EXPECTED_PATCH);
}
