-- wrk script: POST a fixed JSON body to the URL given on the command line.
-- The body comes from the WRK_BODY environment variable (default {"x": 2}).
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY") or '{"x": 2}'
wrk.headers["Content-Type"] = "application/json"
