--- The proleptic Gregorian calendar in UTC arithmetic, no time zone and no
-- os.time: what an HTTP Date header (geoservices.net.token) and a
-- GeoPackage DATETIME text (geoservices.store.edits.capture) need to become
-- epoch seconds. The C core has its own copy for the store's bulk apply
-- (csrc/store/isotime.c).
-- @module geoservices.base.calendar
local calendar = {}

--- Days from 1970-01-01 to a date (H. Hinnant's days_from_civil).
-- @int y the year (any sign)
-- @int m the month, 1 to 12
-- @int d the day of the month
-- @treturn integer the days (negative before 1970)
function calendar.days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m > 2 and m - 3 or m + 9) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

return calendar
