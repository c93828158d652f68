-- wrk script: POST a body read from a file (WRK_BODY_FILE), e.g. binary MessagePack that cannot
-- travel in an environment variable, with the content type WRK_CONTENT_TYPE. With WRK_DELAY_MS,
-- each connection waits that long before each request (a paced load).
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = os.getenv("WRK_CONTENT_TYPE") or "application/octet-stream"

local pause = tonumber(os.getenv("WRK_DELAY_MS") or "")
if pause ~= nil then
  delay = function()
    return pause
  end
end
