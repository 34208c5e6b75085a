// The Prometheus scrape (GET /metrics): the route table of the metrics.
#include "route_table.h"

namespace gantry::server {
namespace {

void scrape(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  HttpResponse m;
  m.content_type = "text/plain; version=0.0.4; charset=utf-8";
  m.body = s.metrics.render(s.runtime, s.gauges(/*own_requests=*/1));
  reply->send(std::move(m));
}

const Route kRoutes[] = {
    // Answered while draining too: a scrape sees the drain.
    {.method = "GET",
     .pattern = "/metrics",
     .protocol = Protocol::kHttp,
     .runs = Route::Runs::kControl,
     .handle = scrape,
     .while_draining = true},
};

}  // namespace

std::span<const Route> metrics_routes() { return kRoutes; }

}  // namespace gantry::server
