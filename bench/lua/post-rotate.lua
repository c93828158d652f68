-- wrk script: POST the same JSON body (WRK_BODY) to each of several paths in turn.
-- WRK_PATHS lists the paths, comma-separated (e.g. one per model: /v2/models/m01/infer,...).
local paths = {}
for p in string.gmatch(os.getenv("WRK_PATHS") or "/", "[^,]+") do
  paths[#paths + 1] = p
end
local body = os.getenv("WRK_BODY") or "{}"
local headers = { ["Content-Type"] = "application/json" }
local i = 0

request = function()
  i = i % #paths + 1
  return wrk.format("POST", paths[i], headers, body)
end
