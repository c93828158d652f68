-- wrk script: POST a V2 inference body read from a file to the URL given on the command line.
-- WRK_BODY_FILE names the file (written by the scenario, as a body this large does not fit in
-- the environment). With the binary tensor extension, WRK_HEADER_LENGTH is the length of the
-- JSON header before the binary data, sent as Inference-Header-Content-Length.
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
local header = os.getenv("WRK_HEADER_LENGTH")
if header ~= nil and header ~= "" then
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.headers["Inference-Header-Content-Length"] = header
else
  wrk.headers["Content-Type"] = "application/json"
end
