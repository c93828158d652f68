-- wrk script: POST a V2 inference body read from a file, as post-file.lua does (WRK_BODY_FILE,
-- WRK_CONTENT_TYPE). With the binary tensor extension, WRK_HEADER_LENGTH is the length of the
-- JSON header before the binary data, sent as Inference-Header-Content-Length. Run from the
-- repository's root.
dofile("bench/lua/post-file.lua")
local header = os.getenv("WRK_HEADER_LENGTH")
if header ~= nil and header ~= "" then
  wrk.headers["Inference-Header-Content-Length"] = header
end
