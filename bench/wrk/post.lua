-- POST bodies in turn, as args[1] says:
--   "forms" FILE: the urlencoded forms in FILE, one a line (each an edit of another cell);
--   "seeded" FILE [START]: the JSON body in FILE with a new "seed" in each request ("seed":0 in the file
--   is replaced by a counter from START), so no two requests draw the same weights.
local mode, bodies, next_body = nil, {}, 0
local prefix, suffix, counter

function init(args)
  mode = args[1]
  if mode == "forms" then
    for line in io.lines(args[2]) do
      if #line > 0 then bodies[#bodies + 1] = line end
    end
    assert(#bodies > 0, "no forms in " .. args[2])
  else
    assert(mode == "seeded", "mode: forms or seeded")
    local f = assert(io.open(args[2], "rb"))
    local body = f:read("*a")
    f:close()
    local i, j = body:find('"seed":0', 1, true)
    assert(i, "the body has no \"seed\":0")
    prefix, suffix = body:sub(1, i + 6), body:sub(j + 1)
    counter = tonumber(args[3] or "0")
  end
end

-- wrk.format takes the headers given or wrk.headers (those of -H), not both: a copy of them, plus the type.
local function with_type(content_type)
  local headers = { ["Content-Type"] = content_type }
  for name, value in pairs(wrk.headers) do headers[name] = value end
  return headers
end

function request()
  if mode == "forms" then
    next_body = next_body % #bodies + 1
    return wrk.format("POST", nil, with_type("application/x-www-form-urlencoded"), bodies[next_body])
  end
  counter = counter + 1
  return wrk.format("POST", nil, with_type("application/json"), prefix .. counter .. suffix)
end
