{
  "targets": [
    {
      "target_name": "gate_mux_relay",
      "sources": ["native/relay.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra"],
      "conditions": [
        ["OS!='linux'", { "type": "none", "sources": [] }],
        ["'<!(node -p \"process.env.GATE_MUX_SANITIZE || ''\")'=='1'", {
          "cflags_cc": ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-O1", "-g"],
          "ldflags": ["-fsanitize=address,undefined"]
        }]
      ]
    }
  ]
}
