std = "lua54"
max_line_length = 120
include_files = {
  "lua/**/*.lua", "examples/**/*.lua", "spec/**/*.lua", "rockspec/*.rockspec", ".busted", ".luacheckrc",
}
exclude_files = { ".luarocks", "build", "lua_modules" }
files["spec/**/*_spec.lua"] = { std = "+busted" }
files["spec/helper.lua"] = { std = "+busted" }
files["rockspec/*.rockspec"] = {
  globals = { "rockspec_format", "package", "version", "source", "description", "dependencies",
              "external_dependencies", "build", "test_dependencies", "test" },
}
files[".luacheckrc"] = { globals = { "std", "max_line_length", "include_files", "exclude_files", "files" } }
