-- wrk script: POST JSON bodies read from a file (WRK_BODIES_FILE, one body a line), each
-- connection taking them in turn from its own starting line, so that the load mixes them.
local bodies = {}
for line in io.lines(os.getenv("WRK_BODIES_FILE")) do
  if #line > 0 then bodies[#bodies + 1] = line end
end
local headers = { ["Content-Type"] = "application/json" }
local i = 0

init = function()
  i = math.random(#bodies) - 1
end

request = function()
  i = i % #bodies + 1
  return wrk.format("POST", nil, headers, bodies[i])
end
