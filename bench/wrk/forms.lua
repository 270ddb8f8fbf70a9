-- POST the urlencoded forms in the file args[1], one a line, in turn (each an edit of another cell).
local bodies = {}
local next_body = 0

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  assert(#bodies > 0, "no forms in " .. args[1])
end

-- wrk.format takes the headers given or wrk.headers (those of -H), not both: a copy of them, plus the type.
function with_type(content_type)
  local headers = { ["Content-Type"] = content_type }
  for name, value in pairs(wrk.headers) do headers[name] = value end
  return headers
end

function request()
  next_body = next_body % #bodies + 1
  return wrk.format("POST", nil, with_type("application/x-www-form-urlencoded"), bodies[next_body])
end
