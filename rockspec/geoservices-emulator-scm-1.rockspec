rockspec_format = "3.0"
package = "geoservices-emulator"
version = "scm-1"
source = {
  url = "git+https://github.com/lua-geoservices/lua-geoservices.git",
}
description = {
  summary = "Local emulator of the GIS server the geoservices client talks to, for tests and experiments",
  detailed = [[
    A real local server of synchronizeReplica, configure, getServicesById and
    notebooks/snapshots/list, with state (features, replicas, async jobs,
    organization stages), fault injection and an example world. Written in Lua
    over a small libmicrohttpd binding (geoservices.httpd). Started with
    `geoservices-emulator` or `geoservices emulator`.
  ]],
  homepage = "https://github.com/lua-geoservices/lua-geoservices",
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
  "geoservices", -- the C core (geoservices.core) and geoservices.json
  "argparse",    -- its command line
}
external_dependencies = {
  MICROHTTPD = { header = "microhttpd.h" },
}
build = {
  type = "make",
  build_target = "httpd",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    MHD_INCDIR = "$(MICROHTTPD_INCDIR)",
    MHD_LIBDIR = "$(MICROHTTPD_LIBDIR)",
  },
  install_target = "install-emulator",
  -- the build_variables too: with the same flags the install step compiles nothing again
  install_variables = {
    CFLAGS = "$(CFLAGS)",
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    MHD_INCDIR = "$(MICROHTTPD_INCDIR)",
    MHD_LIBDIR = "$(MICROHTTPD_LIBDIR)",
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
    BINDIR = "$(BINDIR)", -- the geoservices-emulator command
  },
}
