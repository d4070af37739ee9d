rockspec_format = "3.0"
package = "geoservices"
version = "scm-1"
source = {
  url = "git+https://github.com/lua-geoservices/lua-geoservices.git",
}
description = {
  summary = "Client for replica sync, organization configure, services by id and notebook snapshots",
  detailed = [[
    A Lua 5.4 client, with a libcurl-based C core, for four operations of a GIS
    server's REST interface: synchronizeReplica, configure, getServicesById and
    notebooks/snapshots/list, and the `geoservices` command line. Needs
    libcurl, libsqlite3 and libproj (the replica store); the local emulator
    of the server is the geoservices-emulator rock.
  ]],
  homepage = "https://github.com/lua-geoservices/lua-geoservices",
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
  "lua-cjson",
  "argparse", -- the geoservices command
}
external_dependencies = {
  CURL = { header = "curl/curl.h" },
  SQLITE = { header = "sqlite3.h" }, -- the replica store (GeoPackage)
  PROJ = { header = "proj.h" }, -- the store's CRS definitions (PROJ's database, proj.db)
}
-- `make install` gets the compiler's variables too: with the same flags the
-- install step finds core.so built and compiles nothing (with the Makefile's
-- defaults it compiled every C file again and installed a core.so built
-- without LuaRocks' CFLAGS).
build = {
  type = "make",
  build_target = "core", -- geoservices/core.so only (httpd.so is the emulator rock's)
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    CURL_INCDIR = "$(CURL_INCDIR)",
    CURL_LIBDIR = "$(CURL_LIBDIR)",
    SQLITE_INCDIR = "$(SQLITE_INCDIR)",
    SQLITE_LIBDIR = "$(SQLITE_LIBDIR)",
    PROJ_INCDIR = "$(PROJ_INCDIR)",
    PROJ_LIBDIR = "$(PROJ_LIBDIR)",
  },
  install_target = "install", -- core.so, the modules but geoservices.emulator.*, the command
  install_variables = {
    CFLAGS = "$(CFLAGS)", -- the build_variables, as they are
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    CURL_INCDIR = "$(CURL_INCDIR)",
    CURL_LIBDIR = "$(CURL_LIBDIR)",
    SQLITE_INCDIR = "$(SQLITE_INCDIR)",
    SQLITE_LIBDIR = "$(SQLITE_LIBDIR)",
    PROJ_INCDIR = "$(PROJ_INCDIR)",
    PROJ_LIBDIR = "$(PROJ_LIBDIR)",
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
    BINDIR = "$(BINDIR)", -- the geoservices command (a launcher of geoservices.cli)
    -- the shell completions stay inside the rock's own directory (PREFIX is
    -- LuaRocks' install directory of this rock), so `luarocks remove` takes
    -- them away; `geoservices completion bash|zsh|fish` prints them for a shell
    BASH_COMPLETION_DIR = "$(PREFIX)/share/bash-completion/completions",
    ZSH_COMPLETION_DIR = "$(PREFIX)/share/zsh/site-functions",
    FISH_COMPLETION_DIR = "$(PREFIX)/share/fish/vendor_completions.d",
  },
}
test_dependencies = { "busted" }
test = { type = "busted" }
