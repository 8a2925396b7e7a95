-- wrk script: POST the JSON body in WRK_BODY, with X-System1-Priority from WRK_PRIORITY if set.
-- wrk itself reports latency percentiles and "Non-2xx or 3xx responses".
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
local priority = os.getenv("WRK_PRIORITY")
if priority and priority ~= "" then
  wrk.headers["X-System1-Priority"] = priority
end
