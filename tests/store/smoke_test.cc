#include <gtest/gtest.h>
#include <unistd.h>

#include "flintkv/store.h"

namespace flintkv {
namespace {

TEST(Smoke, PutGetReopen) {
  std::string path = "/dev/shm/flintkv_smoke_" + std::to_string(getpid());
  unlink(path.c_str());
  StoreOptions o;
  o.pool.path = path;
  o.pool.size = 64 << 20;
  {
    std::unique_ptr<Store> s;
    ASSERT_TRUE(Store::Open(o, &s).ok());
    ASSERT_TRUE(s->Put("a", "1").ok());
    ASSERT_TRUE(s->Put("b", "2").ok());
    ASSERT_TRUE(s->Put("a", "3").ok());
    ASSERT_TRUE(s->Delete("b").ok());
    std::string v;
    ASSERT_TRUE(s->Get("a", &v).ok());
    EXPECT_EQ(v, "3");
    EXPECT_TRUE(s->Get("b", &v).IsNotFound());
  }
  {
    std::unique_ptr<Store> s;
    Status st = Store::Open(o, &s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::string v;
    ASSERT_TRUE(s->Get("a", &v).ok());
    EXPECT_EQ(v, "3");
    EXPECT_TRUE(s->Get("b", &v).IsNotFound());
    EXPECT_EQ(s->GetStats().visible_version, 4u);
  }
  unlink(path.c_str());
}

}  // namespace
}  // namespace flintkv
