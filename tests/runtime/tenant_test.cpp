// Tenants (gantry/runtime/tenant.h) and their admission at a ModelQueue: the 60 s windows and when they
// free, each limit on its own, a reload that keeps usage, the weighted share of a model's waiting line,
// the places kept for interactive requests, and the deadline forecast. Time is an injected clock:
// nothing sleeps, nothing is timed.
#include "gantry/runtime/tenant.h"

#include <gtest/gtest.h>

#include "gantry/runtime/model_queue.h"
#include "gantry/runtime/queue_forecast.h"

namespace gantry::runtime {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct FakeClock {
  std::shared_ptr<Clock::time_point> t = std::make_shared<Clock::time_point>(Clock::time_point{} + 1000h);
  TenantClock clock() const {
    return [t = t] { return *t; };
  }
  void advance(Clock::duration d) { *t += d; }
  Clock::time_point now() const { return *t; }
};

TEST(RateWindow, CountsTheLastMinuteAndSaysWhenItFrees) {
  RateWindow w(60s, 1ms);
  const auto t0 = Clock::time_point{} + 1h;
  w.add(t0, 3);
  w.add(t0 + 10s, 5);
  EXPECT_EQ(w.used(t0 + 10s), 8u);
  EXPECT_EQ(w.frees(t0 + 10s, 10, 2), t0 + 10s) << "8 + 2 fits a limit of 10 now";
  EXPECT_EQ(w.frees(t0 + 10s, 10, 3), t0 + 60s) << "the first 3 must leave first";
  EXPECT_EQ(w.frees(t0 + 10s, 5, 5), t0 + 70s) << "both must leave";
  EXPECT_EQ(w.frees(t0 + 10s, 5, 6), t0 + 70s) << "more than the limit: as long as a window can take";
  EXPECT_EQ(w.used(t0 + 60s), 5u) << "the first entry left exactly 60 s after it came";
  EXPECT_EQ(w.resets(t0 + 60s), t0 + 70s);
  EXPECT_EQ(w.used(t0 + 70s), 0u);
  EXPECT_EQ(w.resets(t0 + 70s), t0 + 70s);
}

TEST(RateWindow, MergesCloseEntriesAtTheLaterTime) {
  RateWindow w(60s, 1s);
  const auto t0 = Clock::time_point{} + 1h;
  w.add(t0, 1);
  w.add(t0 + 500ms, 1);
  EXPECT_EQ(w.frees(t0 + 1s, 2, 1), t0 + 500ms + 60s) << "never earlier than the truth";
  w.take_back(1);
  EXPECT_EQ(w.used(t0 + 1s), 1u);
}

TEST(Tenant, RequestsPerMinuteRefusesWithTheTimeTheWindowFrees) {
  FakeClock c;
  TenantLimits l;
  l.requests_per_minute = 2;
  auto t = std::make_shared<Tenant>("acme", l, c.clock());
  int retry = 0;
  auto a = t->admit("m", nullptr, &retry);
  ASSERT_TRUE(a.ok());
  c.advance(20s);
  auto b = t->admit("m", nullptr, &retry);
  ASSERT_TRUE(b.ok());
  c.advance(5s);
  auto refused = t->admit("m", nullptr, &retry);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(retry, 35) << "the first request leaves the window 60 s after it came, 35 s from now";
  EXPECT_NE(refused.status().message().find("acme"), std::string::npos) << refused.status().message();
  auto rs = t->rate_state();
  ASSERT_TRUE(rs.requests);
  EXPECT_EQ(rs.requests->limit, 2u);
  EXPECT_EQ(rs.requests->remaining, 0u);
  EXPECT_FALSE(rs.tokens) << "no tokens limit: no tokens line";
  c.advance(35s);
  EXPECT_TRUE(t->admit("m", nullptr, &retry).ok()) << "the window freed when it said";
  EXPECT_EQ(t->counters().refused_rate, 1u);
  EXPECT_EQ(t->counters().admitted, 3u);
}

TEST(Tenant, TokensPerMinuteCountsWhatEndedRequestsUsed) {
  FakeClock c;
  TenantLimits l;
  l.tokens_per_minute = 100;
  auto t = std::make_shared<Tenant>("acme", l, c.clock());
  int retry = 0;
  {
    auto h = t->admit("m", nullptr, &retry);
    ASSERT_TRUE(h.ok());
    t->add_tokens(60);
  }
  c.advance(10s);
  ASSERT_TRUE(t->admit("m", nullptr, &retry).ok()) << "60 of 100 used";
  t->add_tokens(40);
  c.advance(1s);
  auto refused = t->admit("m", nullptr, &retry);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(retry, 49) << "the first 60 tokens leave 60 s after they were counted";
  auto rs = t->rate_state();
  ASSERT_TRUE(rs.tokens);
  EXPECT_EQ(rs.tokens->remaining, 0u);
  EXPECT_EQ(t->counters().tokens, 100u);
}

TEST(Tenant, ConcurrencyModelsAndMaxTokens) {
  FakeClock c;
  TenantLimits l;
  l.max_concurrent = 1;
  l.models = {"allowed"};
  l.max_tokens = 64;
  auto t = std::make_shared<Tenant>("acme", l, c.clock());
  int retry = 0;
  auto other = t->admit("other", nullptr, &retry);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
  int max_tokens = 1000;
  auto h = t->admit("allowed", &max_tokens, &retry);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(max_tokens, 64) << "lowered to the tenant's max_tokens";
  int small = 10;
  auto second = t->admit("allowed", &small, &retry);
  ASSERT_FALSE(second.ok()) << "one at a time";
  EXPECT_EQ(t->counters().refused_concurrency, 1u);
  EXPECT_EQ(t->counters().in_flight, 1u);
  h->release();
  auto third = t->admit("allowed", &small, &retry);
  ASSERT_TRUE(third.ok()) << "its place came back";
  EXPECT_EQ(small, 10) << "a smaller max_tokens stays";
}

TEST(TenantRegistry, AReloadKeepsUsageAndTakesTheNewLimits) {
  FakeClock c;
  TenantRegistry r(c.clock());
  TenantLimits l;
  l.requests_per_minute = 1;
  auto t = r.update("acme", l);
  int retry = 0;
  ASSERT_TRUE(t->admit("m", nullptr, &retry).ok());
  ASSERT_FALSE(t->admit("m", nullptr, &retry).ok());
  l.requests_per_minute = 2;
  auto same = r.update("acme", l);
  EXPECT_EQ(same.get(), t.get()) << "the same tenant, its usage kept";
  ASSERT_TRUE(t->admit("m", nullptr, &retry).ok()) << "the new limit applies";
  ASSERT_FALSE(t->admit("m", nullptr, &retry).ok()) << "and counts what came before the reload";
  r.retain({});
  EXPECT_EQ(r.find("acme"), nullptr);
  EXPECT_TRUE(r.list().empty());
}

// A tensor model that runs one request at a time (capacity 1) and never runs anything here: admit() only.
class IdleModel final : public backend::Model {
 public:
  IdleModel() {
    meta_.name = "idle";
    meta_.backend = "fake";
  }
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor>) override {
    return std::vector<NamedTensor>{};
  }

 private:
  backend::ModelMetadata meta_;
};

QueueOptions waiting(size_t max_queue) {
  QueueOptions o;
  o.max_queue = max_queue;
  return o;
}

Admission as(const std::shared_ptr<Tenant>& t) {
  Admission a;
  a.tenant = t;
  return a;
}

TEST(TenantQueue, AFloodingTenantKeepsOnlyItsShareOfTheWaitingLine) {
  FakeClock c;
  IdleModel model;
  ModelQueue q("m", model, waiting(7));  // 1 running + 7 waiting = 8 places
  auto flood = std::make_shared<Tenant>("flood", TenantLimits{}, c.clock());
  auto quiet = std::make_shared<Tenant>("quiet", TenantLimits{}, c.clock());
  std::vector<ModelQueue::Ticket> held;
  for (int i = 0; i < 7; ++i) {
    auto t = q.admit(as(flood));
    ASSERT_TRUE(t.ok()) << "alone, it may take any place: " << i;
    held.push_back(std::move(*t));
  }
  auto q1 = q.admit(as(quiet));
  ASSERT_TRUE(q1.ok()) << "another tenant still gets a place";
  Admission f = as(flood);
  q1->release();
  // With quiet holding a place, flood's share is 8 * 1/2 = 4: it holds 7, so it waits for its own.
  auto q2 = q.admit(as(quiet));
  ASSERT_TRUE(q2.ok());
  auto over = q.admit(f);
  ASSERT_FALSE(over.ok()) << "the line is full anyway";
  held.pop_back();
  held.pop_back();  // flood holds 5, quiet 1: 2 places free
  auto refused = q.admit(f);
  ASSERT_FALSE(refused.ok()) << "flood is over its share (5 of 8 with quiet waiting)";
  EXPECT_NE(refused.status().message().find("share"), std::string::npos) << refused.status().message();
  EXPECT_EQ(*f.retry_after, kRetryAfterSeconds);
  auto q3 = q.admit(as(quiet));
  EXPECT_TRUE(q3.ok()) << "quiet, under its share, takes a freed place";
  EXPECT_EQ(q.outstanding("flood"), 5u);
  EXPECT_EQ(q.outstanding("quiet"), 2u);
  EXPECT_EQ(flood->counters().refused_queue, 2u);
  EXPECT_EQ(flood->counters().admitted, 7u) << "a refusal at the queue is not counted as admitted";
}

TEST(TenantQueue, WeightsSetTheShares) {
  FakeClock c;
  IdleModel model;
  ModelQueue q("m", model, waiting(11));  // 12 places
  TenantLimits heavy_limits;
  heavy_limits.weight = 3;
  auto heavy = std::make_shared<Tenant>("heavy", heavy_limits, c.clock());
  auto light = std::make_shared<Tenant>("light", TenantLimits{}, c.clock());
  std::vector<ModelQueue::Ticket> held;
  auto first = q.admit(as(light));
  ASSERT_TRUE(first.ok());
  held.push_back(std::move(*first));
  size_t heavy_in = 0;
  while (true) {
    auto t = q.admit(as(heavy));
    if (!t.ok()) break;
    held.push_back(std::move(*t));
    ++heavy_in;
  }
  EXPECT_EQ(heavy_in, 9u) << "3/4 of 12 places";
  size_t light_in = 1;
  while (true) {
    auto t = q.admit(as(light));
    if (!t.ok()) break;
    held.push_back(std::move(*t));
    ++light_in;
  }
  EXPECT_EQ(light_in, 3u) << "1/4 of 12 places";
}

TEST(TenantQueue, BatchTenantsLeaveTheLastPlacesToInteractiveOnes) {
  FakeClock c;
  IdleModel model;
  ModelQueue q("m", model, waiting(8));  // 9 places, the last 2 kept for interactive requests
  TenantLimits bl;
  bl.priority = Priority::kBatch;
  auto batch = std::make_shared<Tenant>("batch", bl, c.clock());
  std::vector<ModelQueue::Ticket> held;
  size_t in = 0;
  while (true) {
    auto t = q.admit(as(batch));
    if (!t.ok()) {
      EXPECT_NE(t.status().message().find("interactive"), std::string::npos) << t.status().message();
      break;
    }
    held.push_back(std::move(*t));
    ++in;
  }
  EXPECT_EQ(in, 7u);
  auto inter = q.admit();  // no tenant: interactive
  EXPECT_TRUE(inter.ok()) << "an interactive request still gets a place";
  held.clear();
  EXPECT_TRUE(q.admit(as(batch)).ok()) << "a batch tenant progresses once places free: no starvation";
}

TEST(QueueForecast, PredictsFromWhatItMeasured) {
  QueueForecast f;
  EXPECT_FALSE(f.predict_ms(0, 1, 100, 10)) << "nothing measured: no prediction";
  // 100 prompt tokens in 50 ms, 11 tokens generated over 100 ms (10 steps of 10 ms).
  f.observe(100, 50, 11, 100, false);
  auto p = f.predict_ms(0, 1, 200, 11);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(*p, 200 * 0.5 + 11 * 10.0);
  // 2 running, 1 waiting ahead: it is second in line, and a place frees every 150 / 2 ms.
  auto behind = f.predict_ms(3, 2, 200, 11);
  ASSERT_TRUE(behind);
  EXPECT_DOUBLE_EQ(*behind, 2 * 75 + 200 * 0.5 + 11 * 10.0);
  auto next = f.predict_ms(2, 2, 200, 11);  // both places taken, none waiting: the first to free
  ASSERT_TRUE(next);
  EXPECT_DOUBLE_EQ(*next, 75 + 200 * 0.5 + 11 * 10.0);
  // A waited request's prompt time holds queue time: only its decode speed counts.
  f.observe(100, 5000, 11, 100, true);
  EXPECT_DOUBLE_EQ(f.figures().prompt_ms_per_token, 0.5);
}

// Speeds are time over tokens of recent requests together: a short request's fixed cost (100 ms for 10
// tokens) does not make a long prompt (1,000 tokens in 1 s) look ten times slower than it is.
TEST(QueueForecast, SpeedsWeighEveryTokenNotEveryRequest) {
  QueueForecast f;
  f.observe(10, 100, 2, 50, false);
  f.observe(1000, 1000, 2, 50, false);
  const double a = QueueForecast::kAlpha;
  EXPECT_DOUBLE_EQ(f.figures().prompt_ms_per_token, (100 + a * (1000 - 100)) / (10 + a * (1000 - 10)));
  EXPECT_LT(f.figures().prompt_ms_per_token, 2.0) << "a per-request average would say 8.2 ms a token";
}

// Generations that end as told: each result has 100 prompt tokens (50 ms) and 11 generated (100 ms);
// the text callback is called once with "x" before it ends.
class ScriptedModel final : public backend::Model {
 public:
  ScriptedModel() {
    meta_.name = "scripted";
    meta_.backend = "fake";
  }
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor>) override {
    return std::vector<NamedTensor>{};
  }
  Result<std::unique_ptr<backend::Generation>> start_generation(backend::GenerationRequest request) override {
    auto g = std::make_unique<Done>();
    g->result.n_prompt_tokens = 100;
    g->result.n_cached_tokens = cached;
    g->result.prompt_ms = cached > 0 ? 5 : 50;  // a cache hit costs its fixed latency only
    g->result.generation_ms = 100;
    g->result.tokens.assign(11, 7);
    if (request.on_text && !request.on_text("x")) g->result.finish = backend::FinishReason::kCancelled;
    last_max_tokens = request.max_tokens;
    if (request.on_done) request.on_done();
    return std::unique_ptr<backend::Generation>(std::move(g));
  }
  int last_max_tokens = 0;
  int cached = 0;  // prompt tokens the next results say the cache served

 private:
  struct Done final : backend::Generation {
    backend::GenerationResult result;
    uint64_t id() const override { return 1; }
    void cancel() override {}
    bool done() const override { return true; }
    Result<backend::GenerationResult> wait() override { return result; }
  };
  backend::ModelMetadata meta_;
};

// Each priority class predicts from its own figures once it has them: a batch tenant's long prompts,
// evaluated in short chunks between other work (4 ms a token here), do not make an interactive prompt
// (0.5 ms a token) look slow; a class not measured yet uses every request's figures.
TEST(QueueForecast, EachClassPredictsFromItsOwnSpeeds) {
  QueueForecast f;
  f.observe(2000, 8000, 11, 300, false, /*priority_class=*/1);  // batch: 4 ms per prompt token, 30 ms a step
  const double batch_only = 100 * 4.0 + 11 * 30.0;
  EXPECT_DOUBLE_EQ(*f.predict_ms(0, 4, 100, 11, 0), batch_only)
      << "interactive not measured: every request's";
  f.observe(100, 50, 11, 100, false, /*priority_class=*/0);  // interactive: 0.5 ms per token, 10 ms a step
  EXPECT_DOUBLE_EQ(*f.predict_ms(0, 4, 100, 11, 0), 100 * 0.5 + 11 * 10.0);
  EXPECT_DOUBLE_EQ(*f.predict_ms(0, 4, 100, 11, 1), batch_only);
  EXPECT_EQ(f.figures(0).samples, 1u);
  EXPECT_EQ(f.figures(1).samples, 1u);
  EXPECT_EQ(f.figures().samples, 2u);
  EXPECT_GT(f.figures().prompt_ms_per_token, 3.0)
      << "every request's figures are dominated by the long prompt";
}

TEST(TenantQueue, AGenerationCountsItsTokensAndTeachesTheForecast) {
  FakeClock c;
  ScriptedModel model;
  ModelQueue q("m", model, waiting(4));
  TenantLimits l;
  l.tokens_per_minute = 200;
  l.max_tokens = 16;
  auto t = std::make_shared<Tenant>("acme", l, c.clock());
  backend::GenerationRequest r;
  r.tokens.assign(100, 1);
  r.max_tokens = 1000;
  auto g = q.generate(std::move(r), as(t));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(model.last_max_tokens, 16) << "the tenant's max_tokens reached the backend";
  ASSERT_TRUE((*g)->wait().ok());
  EXPECT_EQ(t->counters().tokens, 111u) << "prompt + generated";
  ASSERT_TRUE((*g)->wait().ok());
  EXPECT_EQ(t->counters().tokens, 111u) << "counted once";
  EXPECT_EQ(q.outstanding(), 0u);
  EXPECT_EQ(t->counters().in_flight, 0u);
  const auto f = q.forecast();
  EXPECT_EQ(f.samples, 1u);
  EXPECT_DOUBLE_EQ(f.prompt_ms_per_token, 0.5);
  EXPECT_DOUBLE_EQ(f.decode_ms_per_token, 10.0);
}

// A prompt the cache served (99 of 100 tokens, 5 ms) teaches what such a prompt costs: 0.05 ms a prompt
// token, not 5 ms per evaluated token, which would predict the same prompt again at 500 ms.
TEST(TenantQueue, APromptServedFromTheCacheIsForecastAtWhatItCost) {
  FakeClock c;
  ScriptedModel model;
  model.cached = 99;
  ModelQueue q("m", model, waiting(4));
  auto t = std::make_shared<Tenant>("acme", TenantLimits{}, c.clock());
  backend::GenerationRequest r;
  r.tokens.assign(100, 1);
  auto g = q.generate(std::move(r), as(t));
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->wait().ok());
  EXPECT_DOUBLE_EQ(q.forecast().prompt_ms_per_token, 0.05);
}

TEST(TenantQueue, ADeadlineThatCannotBeKeptIsRefusedAtOnce) {
  FakeClock c;
  ScriptedModel model;
  ModelQueue q("m", model, waiting(4));
  auto t = std::make_shared<Tenant>("acme", TenantLimits{}, c.clock());
  {
    backend::GenerationRequest r;
    r.tokens.assign(100, 1);
    auto g = q.generate(std::move(r), as(t));
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE((*g)->wait().ok());  // measured: 0.5 ms per prompt token, 10 ms per generated one
  }
  Admission tight = as(t);
  tight.deadline = c.now() + 100ms;  // 100 prompt tokens + 11 generated: 160 ms predicted
  backend::GenerationRequest r;
  r.tokens.assign(100, 1);
  r.max_tokens = 11;
  auto refused = q.generate(std::move(r), tight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("deadline"), std::string::npos) << refused.status().message();
  EXPECT_EQ(*tight.retry_after, 1);
  EXPECT_EQ(t->counters().refused_deadline, 1u);
  EXPECT_EQ(q.outstanding(), 0u);
  Admission roomy = as(t);
  roomy.deadline = c.now() + 200ms;
  auto admitted = q.admit(roomy, nullptr, 100);
  EXPECT_TRUE(admitted.ok()) << "160 ms fits in 200";
}

// The forecast counts as waiting ahead only what the schedulers serve first: a batch tenant's waiting
// requests do not delay an interactive one, so they do not get it refused; interactive ones do.
TEST(TenantQueue, ADeadlineCountsOnlyTheWaitingThatGoesFirst) {
  FakeClock c;
  ScriptedModel model;
  ModelQueue q("m", model, waiting(4));  // 1 running + 4 waiting
  auto measured = std::make_shared<Tenant>("m", TenantLimits{}, c.clock());
  {
    backend::GenerationRequest r;
    r.tokens.assign(100, 1);
    auto g = q.generate(std::move(r), as(measured));
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE((*g)->wait().ok());  // a request takes 150 ms: 50 ms prompt, 10 steps of 10 ms
  }
  TenantLimits bl;
  bl.priority = Priority::kBatch;
  auto batch = std::make_shared<Tenant>("batch", bl, c.clock());
  auto chat = std::make_shared<Tenant>("chat", TenantLimits{}, c.clock());
  auto other = std::make_shared<Tenant>("other", TenantLimits{}, c.clock());
  auto with_deadline = [&](const std::shared_ptr<Tenant>& t) {
    Admission a = as(t);
    a.deadline = c.now() + 400ms;
    return q.admit(a, nullptr, 100);  // 100 prompt tokens, 1 generated: 60 ms of its own
  };
  auto four_places = [&](const std::shared_ptr<Tenant>& t) {
    std::vector<ModelQueue::Ticket> held;
    for (int i = 0; i < 4; ++i) {
      auto ticket = q.admit(as(t));
      EXPECT_TRUE(ticket.ok()) << t->name() << " " << i;
      if (ticket.ok()) held.push_back(std::move(*ticket));
    }
    return held;
  };
  {
    const auto held = four_places(batch);
    // 1 running, 3 batch requests waiting: none goes before it, so it waits for one place (150 ms).
    auto admitted = with_deadline(chat);
    EXPECT_TRUE(admitted.ok()) << "210 ms fits in 400: " << admitted.status().message();
  }
  const auto held = four_places(other);
  // 3 interactive requests waiting go first: 4 places must free (600 ms) before its own 60.
  auto refused = with_deadline(chat);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("deadline"), std::string::npos) << refused.status().message();
}

TEST(TenantQueue, AGenerationPastItsDeadlineIsCancelledAtItsNextToken) {
  ScriptedModel model;
  ModelQueue q("m", model, waiting(4));
  auto t = std::make_shared<Tenant>("acme", TenantLimits{});
  Admission late = as(t);
  late.deadline = Clock::now() - 1ms;  // nothing measured yet, so admitted; past at its first token
  backend::GenerationRequest r;
  r.prompt = "hi";
  auto g = q.generate(std::move(r), late);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto result = (*g)->wait();
  ASSERT_FALSE(result.ok()) << "a generation cancelled at its deadline is an error";
  EXPECT_NE(result.status().message().find("deadline"), std::string::npos);
  EXPECT_EQ(t->counters().cancelled_deadline, 1u);
  EXPECT_EQ(q.forecast().samples, 0u) << "a cancelled generation teaches the forecast nothing";
}

}  // namespace
}  // namespace gantry::runtime
