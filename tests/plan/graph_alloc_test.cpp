// The replay of ggml's graph allocator (plan/graph_alloc.h): inputs first, best fit among freed blocks, the
// last block grows the buffer, in-place reuse of a parent with one child, views keep their source alive,
// outputs are never freed. Expected offsets follow ggml-alloc.c by hand.
#include "plan/graph_alloc.h"

#include <gtest/gtest.h>

namespace gantry::plan::graph {
namespace {

TEST(GraphAlloc, InplaceReuseAndBestFit) {
  Graph g;
  const int w = g.external("w");
  const int x = g.input("x", f32(256));                 // 1 KiB at 0
  const int a = g.node("a", false, f32(512), {w, x});   // 2 KiB at 1024; x freed (its only child ran)
  const int b = g.node("b", true, f32(512), {a});       // in place: a has one child
  const int c = g.node("c", false, f32(128), {w, b});   // 512 B: best fit is the freed 1 KiB at 0
  const int d = g.node("d", false, f32(1024), {b, c});  // 4 KiB: no freed block fits; grows at 3072
  g.output(d);
  std::vector<std::string> trace;
  EXPECT_EQ(g.allocate(32, &trace), 3072u + 4096u);
  const std::vector<std::string> want = {"alloc x 1024 @0", "alloc a 2048 @1024", "free x @0",
                                         "reuse a for b",   "alloc c 512 @0",     "alloc d 4096 @3072",
                                         "free b @1024",    "free c @0"};
  EXPECT_EQ(trace, want);
}

TEST(GraphAlloc, ViewsKeepTheirSourceAliveAndOutputsStay) {
  Graph g;
  const int x = g.input("x", f32(64));
  const int a = g.node("a", false, f32(64), {x});
  const int v = g.view("v", a, f32(8, 8));
  const int v2 = g.view("v2", v, f32(64));         // a view of a view still points at a
  const int b = g.node("b", true, f32(64), {v2});  // a view parent is never reused in place
  const int out = g.node("out", false, f32(1024), {b});
  g.output(b);
  g.output(out);
  std::vector<std::string> trace;
  // x at 0, a at 256; x freed. b cannot take a's memory through a view: it gets x's old block at 0. Only
  // when v2 (the last view) is done is a freed; out (4 KiB) then starts at 256, where a was. b is an output
  // and stays allocated.
  EXPECT_EQ(g.allocate(32, &trace), 256u + 4096u);
  const std::vector<std::string> want = {"alloc x 256 @0", "alloc a 256 @256", "free x @0",
                                         "alloc b 256 @0", "free a @256",      "alloc out 4096 @256"};
  EXPECT_EQ(trace, want);
}

TEST(GraphAlloc, AlignmentRoundsEveryBlock) {
  Graph g;
  const int x = g.input("x", i32(3));            // 12 bytes -> 32
  const int y = g.input("y", i32(5));            // 20 bytes -> 32 at 32
  g.output(g.node("z", false, f32(1), {x, y}));  // 4 bytes -> 32 at 64
  EXPECT_EQ(g.allocate(32), 96u);
  EXPECT_EQ(bytes_of(f16(3, 5)), 30u);
  EXPECT_EQ(bytes_of(i64(7)), 56u);
}

}  // namespace
}  // namespace gantry::plan::graph
