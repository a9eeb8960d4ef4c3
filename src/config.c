/* placeholder */ typedef int placeholder_config;
