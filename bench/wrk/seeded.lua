-- POST the JSON body in the file args[1] with a new "seed" in each request: "seed":0 in the file is
-- replaced by a counter, so no two requests draw the same weights.
local prefix, suffix
local counter = 0

function init(args)
  local f = assert(io.open(args[1], "rb"))
  local body = f:read("*a")
  f:close()
  local i, j = body:find('"seed":0', 1, true)
  assert(i, "the body has no \"seed\":0")
  prefix, suffix = body:sub(1, i + 6), body:sub(j + 1)
  counter = tonumber(args[2] or "0")
end

-- wrk.format takes the headers given or wrk.headers (those of -H), not both: a copy of them, plus the type.
function with_type(content_type)
  local headers = { ["Content-Type"] = content_type }
  for name, value in pairs(wrk.headers) do headers[name] = value end
  return headers
end

function request()
  counter = counter + 1
  return wrk.format("POST", nil, with_type("application/json"), prefix .. counter .. suffix)
end
